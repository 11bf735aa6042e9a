"""Simulation workflows on top of any ASE calculator: geometry relaxation and molecular dynamics.

>>> from ase.build import bulk
>>> from mlip.workflows import relax, run_md
>>> result = relax(bulk("Cu", cubic=True).repeat(2), "ase.calculators.emt:EMT", progress=False)
>>> result.converged
True

``calculator`` arguments accept everything :func:`resolve_calculator` does: a shipped model's
name, a checkpoint path, an :class:`mlip.Potential`, an ASE calculator, or ``"module:Class"``.
"""

from mlip.calculators.model_loading import (
    accepted_forms,
    describe_model,
    is_untrained,
    potential_of,
    resolve_calculator,
)
from mlip.workflows.phonons.kappa import KappaResult, load_kappa, run_kappa
from mlip.workflows.md import ENSEMBLES, MDResult, energy_drift, run_md, save_energy_plot
from mlip.workflows.phonons.harmonic import default_supercell, run_phonons
from mlip.workflows.phonons.phonon_result import PhononResult
from mlip.workflows.relax import RelaxResult, relax, spacegroup

__all__ = [
    "ENSEMBLES",
    "KappaResult",
    "MDResult",
    "PhononResult",
    "RelaxResult",
    "accepted_forms",
    "default_supercell",
    "describe_model",
    "energy_drift",
    "is_untrained",
    "load_kappa",
    "potential_of",
    "relax",
    "run_kappa",
    "resolve_calculator",
    "run_md",
    "run_phonons",
    "save_energy_plot",
    "spacegroup",
]
