"""Phonons and lattice thermal conductivity κ by finite displacements, with phonopy and phono3py.

The two workflows and what they share, one module per concept:

* :mod:`.settings` holds what a user sets: :class:`PhononSettings` and :class:`KappaSettings`
  (frozen, with the defaults, every value checked when made), which the two workflows take;
* :mod:`.harmonic` is :func:`run_phonons`: harmonic phonons (band structure, DOS, thermal
  properties, imaginary modes); :mod:`.phonon_result` their outcome, ``phonons.json`` and the plots;
* :mod:`.kappa` is :func:`run_kappa`: κ by the Matbench Discovery protocol; :mod:`.kappa_result`
  its outcome and ``kappa.json``; :mod:`.kappa_metrics` κ_SRME, κ_SRE and κ_SRD;
  :mod:`.kappa_batch` κ of a whole file of crystals (sharded, resumable, merged, scored);
  :mod:`.kappa_comparison` κ of a model against a reference calculator on a few named crystals;
* shared by both: :mod:`.force_constant_inputs` (the crystal and a float64 calculator, checked
  before anything is computed), :mod:`.supercells` (parsing, widths, choosing, refusing small
  ones), :mod:`.displacement_forces` (forces on displaced supercells, resumable), :mod:`.cache`
  (the ``cache/`` folder: whose forces, the relaxed cell) and :mod:`.phonopy_bridge` (ASE ↔
  phonopy/phono3py);
* :mod:`mlip.cli.phonons` and :mod:`mlip.cli.kappa` are ``mlip phonons`` and ``mlip kappa``; they build
  the settings through :mod:`mlip.cli.force_constants`.
"""

from mlip.workflows.phonons.harmonic import run_phonons
from mlip.workflows.phonons.kappa import run_kappa
from mlip.workflows.phonons.settings import KappaSettings, PhononSettings

__all__ = ["KappaSettings", "PhononSettings", "run_kappa", "run_phonons"]
