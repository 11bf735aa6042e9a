"""Scripts of the repository (benchmarks/, examples/) loaded as modules in a test."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator, Union


@contextlib.contextmanager
def script_module(path: Union[str, Path]) -> Iterator[ModuleType]:
    """The script at ``path`` imported as a module named after its file, registered in ``sys.modules``
    while the context lasts (dataclasses look their module up there), removed afterwards."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)
