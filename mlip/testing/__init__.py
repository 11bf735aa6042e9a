"""Testing tools for mlip and for code built on it: the physics suite any potential must pass, its
structures, small instances of every architecture, labelled cells and the command line in a test.

A new architecture goes through the whole suite in three lines (:class:`PotentialTests`)::

    class TestMyModel(mlip.testing.PotentialTests):
        def make_potential(self):
            return create_model("my_model", species=mlip.testing.SPECIES, cutoff=4.0).double()

or check by check with the functions exported here (from :mod:`mlip.testing.physics`), which raise
``AssertionError``. The package exports that kit: the mixin, the checks, the suite's elements, cutoff
and structures, and small instances of every architecture (:func:`build_potential`). The helpers the
project's own tests use stay in their submodules: :mod:`~mlip.testing.structures` (each structure
builder), :mod:`~mlip.testing.rotations`, :mod:`~mlip.testing.datasets` (labelled EMT cells),
:mod:`~mlip.testing.cli` (the command line in a test), :mod:`~mlip.testing.scripts` and
:func:`mlip.testing.physics.calc64` / :func:`~mlip.testing.physics.dimer_curve`.
Nothing here imports pytest.
"""

from mlip.testing.architectures import ARCHITECTURES, CUTOFF, SPECIES, build_potential
from mlip.testing.physics import (
    check_axis_aligned_bonds,
    check_batch_consistency,
    check_cutoff_continuity,
    check_cutoff_smoothness,
    check_extensivity,
    check_float32_matches_float64,
    check_force_training_gradients,
    check_forces_finite_difference,
    check_image_invariance,
    check_invariance,
    check_nve,
    check_permutation_invariance,
    check_rotation_invariance,
    check_save_load,
    check_short_range_repulsion,
    check_small_cell_images,
    check_smooth_scan,
    check_stress_finite_difference,
    check_stress_tensor,
    check_translation_invariance,
    validate_outputs,
)
from mlip.testing.potential_tests import PotentialTests
from mlip.testing.structures import STRUCTURES

__all__ = [
    "ARCHITECTURES", "CUTOFF", "SPECIES", "STRUCTURES", "PotentialTests", "build_potential",
    "check_axis_aligned_bonds", "check_batch_consistency", "check_cutoff_continuity",
    "check_cutoff_smoothness", "check_extensivity", "check_float32_matches_float64",
    "check_force_training_gradients", "check_forces_finite_difference", "check_image_invariance",
    "check_invariance", "check_nve", "check_permutation_invariance", "check_rotation_invariance",
    "check_save_load", "check_short_range_repulsion", "check_small_cell_images", "check_smooth_scan",
    "check_stress_finite_difference", "check_stress_tensor", "check_translation_invariance",
    "validate_outputs",
]
