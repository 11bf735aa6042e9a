"""Testing tools for mlip and for code built on it: the physics suite any potential must pass, its
structures, small instances of every architecture, labelled cells and the command line in a test.

A new architecture goes through the whole suite in three lines (:class:`PotentialTests`)::

    class TestMyModel(mlip.testing.PotentialTests):
        def make_potential(self):
            return create_model("my_model", species=mlip.testing.SPECIES, cutoff=4.0).double()

or check by check with the functions of :mod:`mlip.testing.physics`, which raise ``AssertionError``.
Nothing here imports pytest.
"""

from mlip.testing.architectures import ARCHITECTURES, CUTOFF, SPECIES, build_potential
from mlip.testing.cli import run_cli
from mlip.testing.datasets import emt_cells, emt_isolated_atom
from mlip.testing.scripts import script_module
from mlip.testing.physics import (
    calc64,
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
    dimer_curve,
    validate_outputs,
)
from mlip.testing.potential_tests import PotentialTests
from mlip.testing.rotations import random_rotations, rotation_about_y
from mlip.testing.structures import (
    STRUCTURES,
    axis_aligned_cubic_cell,
    cluster_with_probe,
    far_molecule,
    slab,
    small_fcc_cell,
    small_pair_cell,
    triclinic_crystal,
)

__all__ = [
    "ARCHITECTURES", "CUTOFF", "SPECIES", "STRUCTURES", "PotentialTests", "axis_aligned_cubic_cell",
    "build_potential", "calc64", "check_axis_aligned_bonds", "check_batch_consistency",
    "check_cutoff_continuity", "check_cutoff_smoothness", "check_extensivity",
    "check_float32_matches_float64", "check_force_training_gradients", "check_forces_finite_difference",
    "check_image_invariance", "check_invariance", "check_nve", "check_permutation_invariance",
    "check_rotation_invariance", "check_save_load", "check_short_range_repulsion",
    "check_small_cell_images", "check_smooth_scan", "check_stress_finite_difference",
    "check_stress_tensor", "check_translation_invariance", "cluster_with_probe", "dimer_curve",
    "emt_cells", "emt_isolated_atom", "far_molecule", "random_rotations", "rotation_about_y", "run_cli",
    "script_module", "slab",
    "small_fcc_cell", "small_pair_cell", "triclinic_crystal", "validate_outputs",
]
