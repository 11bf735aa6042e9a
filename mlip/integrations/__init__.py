"""Bridges to other simulation engines, each in its own module and behind its own extra:

* :mod:`mlip.integrations.torchsim`: any :class:`mlip.Potential` as a torch-sim model (extra
  ``torchsim``, Python >= 3.12); batched relaxation with it is a workflow,
  :mod:`mlip.workflows.discovery.batched_relax`.

Nothing here is imported by ``import mlip``; each module imports its engine when it is imported.
"""

from __future__ import annotations

import sys

from mlip.extras import MissingExtraError, require


def require_torch_sim(purpose: str = "batched relaxation"):
    """Import and return ``torch_sim``, or raise :class:`mlip.extras.MissingExtraError` saying in one
    line what to install (and that torch-sim needs Python >= 3.12, where this Python is older)."""
    if sys.version_info < (3, 12):
        version = ".".join(map(str, sys.version_info[:3]))
        raise MissingExtraError(f"torch-sim (needed for {purpose}) needs Python >= 3.12, this is Python "
                                f"{version}: in a Python 3.12 environment, pip install 'mlip-torch[torchsim]'")
    return require("torch_sim", "torchsim", purpose, package="torch-sim-atomistic")


__all__ = ["require_torch_sim"]
