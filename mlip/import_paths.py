"""Objects named by an import path, ``package.module:Name``: how a user names a class of their own (an
energy term in a model config, a calculator) without editing the package. Importing the module runs only
code installed on this machine, never code from a file being read."""

from __future__ import annotations

import importlib
import re
from typing import Any

#: ``package.module:Name`` (dotted module path, a colon, a Python identifier)
IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def is_import_path(spec: Any) -> bool:
    """Whether ``spec`` is a string of the form ``package.module:Name``."""
    return isinstance(spec, str) and IMPORT_PATH.match(spec) is not None


def import_object(spec: str, what: str) -> Any:
    """The object ``Name`` of module ``package.module`` named by ``spec``; ValueError starting with
    ``{what} {spec!r}:`` when the module does not import or does not define the name."""
    module_name, name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"{what} {spec!r}: cannot import {module_name} ({err})") from None
    if not hasattr(module, name):
        raise ValueError(f"{what} {spec!r}: {name} in {module_name} is not defined")
    return getattr(module, name)


__all__ = ["IMPORT_PATH", "import_object", "is_import_path"]
