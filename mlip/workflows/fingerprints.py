"""Fingerprints that tie a resumable folder to what made it: the model and the structures.

A campaign or cache folder records both (the κ and phonon caches of :mod:`mlip.workflows.phonons`,
the κ and discovery campaigns) and refuses to be resumed by another model or for other
structures, so that results of two never mix.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Sequence

import numpy as np
from ase import Atoms

#: ``repr`` of objects without their own: ``<Foo object at 0x7f…>``, different in every process
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def model_fingerprint(calc) -> str:
    """Identity of a calculator for a cache or campaign (no units): ``"mlip-<hash>"`` of an mlip potential's
    architecture, cutoff, hyperparameters and weights (in float64), or ``"<Class>-<hash>"`` of a
    foreign ASE calculator's class and ``parameters`` (e.g. EMT's ``asap_cutoff``). Memory
    addresses in the ``repr`` of parameter values are left out, so that the same settings give
    the same fingerprint in another process."""
    from mlip.calculators.model_loading import potential_of

    potential = potential_of(calc)
    h = hashlib.sha256()
    if potential is not None:
        import torch

        h.update(f"mlip:{potential.architecture}:{potential.cutoff!r}".encode())
        h.update(json.dumps(potential.hyperparameters, sort_keys=True, default=str).encode())
        for name, tensor in sorted(potential.state_dict().items()):
            t = tensor.detach().to("cpu")
            if t.is_floating_point():
                t = t.to(torch.float64)
            h.update(name.encode())
            h.update(t.contiguous().numpy().tobytes())
        return "mlip-" + h.hexdigest()[:24]
    cls = type(calc)
    h.update(f"{cls.__module__}.{cls.__qualname__}".encode())
    params = getattr(calc, "parameters", None)
    if isinstance(params, dict):
        h.update(_ADDRESS.sub("", json.dumps(params, sort_keys=True, default=repr)).encode())
    return f"{cls.__qualname__}-" + h.hexdigest()[:24]


def structures_fingerprint(structures: Sequence[Atoms]) -> str:
    """SHA-256 of the species, cells, periodicity and positions (rounded to 1e-10 Å) of ``structures``."""
    h = hashlib.sha256()
    h.update(str(len(structures)).encode())
    for atoms in structures:
        h.update(np.asarray(atoms.numbers, dtype=np.int64).tobytes())
        h.update(np.round(np.asarray(atoms.cell.array, dtype=float), 10).tobytes())
        h.update(np.asarray(atoms.pbc, dtype=bool).tobytes())
        h.update(np.round(np.asarray(atoms.positions, dtype=float), 10).tobytes())
    return h.hexdigest()


__all__ = ["model_fingerprint", "structures_fingerprint"]
