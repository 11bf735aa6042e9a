"""Optional dependencies: import a package that only an extra of mlip-torch installs (``phonons``,
``discovery``, ``plot`` in pyproject.toml), or say in one line which extra to install.

    phonopy = require("phonopy", "phonons")
"""

from __future__ import annotations

import importlib
from typing import Optional


class MissingExtraError(ImportError):
    """An optional dependency is not installed. The message names the extra that installs it;
    ``mlip`` prints it as ``mlip: error: <message>`` (exit status 2), without a traceback."""


def require(module: str, extra: str, purpose: Optional[str] = None, package: Optional[str] = None):
    """Import and return ``module`` (e.g. ``"phonopy"`` or ``"pymatgen.core"``), or raise
    :class:`MissingExtraError`: ``phonopy is not installed (needed for phonons): pip install
    'mlip-torch[phonons]'``.

    Args:
        module: the module to import.
        extra: the extra of mlip-torch that installs it.
        purpose: what needs it, for the message.
        package: the name to print (default: ``module``'s top-level package), e.g. the
            distribution ``"matbench-discovery"`` of ``matbench_discovery``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.split(".")[0]
        name = package or top
        why = f" (needed for {purpose})" if purpose else ""
        missing = err.name in (None, top)
        if not missing and module != top:  # is it the package itself that is missing?
            try:
                importlib.import_module(top)
            except ImportError as top_err:
                missing = top_err.name in (None, top)
        if missing:
            problem = f"{name} is not installed{why}"
        else:  # installed but incomplete: a submodule or one of its own dependencies is missing
            problem = f"{name} cannot be imported{why}: {err}"
        raise MissingExtraError(f"{problem}: pip install 'mlip-torch[{extra}]'") from None


__all__ = ["MissingExtraError", "require"]
