"""A pytest mixin that puts a potential through the whole physics suite (:mod:`mlip.testing.physics`).

In a test module::

    from mlip.testing import PotentialTests, SPECIES

    class TestMyModel(PotentialTests):
        def make_potential(self):
            return create_model("my_model", species=SPECIES, cutoff=4.0).double()

and pytest collects one test per check. ``make_potential`` returns a float64 potential built for the
suite's elements (:data:`mlip.testing.SPECIES`); it is called once per test. To leave a check out,
set its test to ``None`` in the subclass (``test_nve = None``). The mixin needs nothing from pytest.
"""

from __future__ import annotations

import torch

from mlip.testing import physics
from mlip.testing.architectures import SPECIES


class PotentialTests:
    """One test per check of :mod:`mlip.testing.physics`, on the potential of ``make_potential``."""

    def make_potential(self):
        """The float64 :class:`mlip.Potential` to test (override this)."""
        raise NotImplementedError(f"{type(self).__name__} must define make_potential(self), returning a "
                                  "float64 mlip.Potential built for the elements of mlip.testing.SPECIES")

    def potential(self):
        """``make_potential()``, checked to be float64 and built for the suite's elements."""
        potential = self.make_potential()
        wrong = sorted({str(t.dtype) for t in potential.parameters() if t.dtype != torch.float64})
        assert not wrong, f"make_potential returned {', '.join(wrong)} weights: call .double() on it"
        missing = [s for s in SPECIES if s not in potential.species]
        assert not missing, (f"the suite's structures need element(s) {', '.join(missing)}; the potential "
                             f"was built for {', '.join(potential.species)}")
        return potential.eval()

    def test_outputs(self):
        physics.validate_outputs(self.potential())

    def test_batch_consistency(self):
        physics.check_batch_consistency(self.potential())

    def test_forces_finite_difference(self):
        physics.check_forces_finite_difference(self.potential())

    def test_stress_finite_difference(self):
        physics.check_stress_finite_difference(self.potential())

    def test_stress_tensor(self):
        physics.check_stress_tensor(self.potential())

    def test_axis_aligned_bonds(self):
        physics.check_axis_aligned_bonds(self.potential())

    def test_force_training_gradients(self):
        physics.check_force_training_gradients(self.potential())

    def test_translation_invariance(self):
        physics.check_translation_invariance(self.potential())

    def test_permutation_invariance(self):
        physics.check_permutation_invariance(self.potential())

    def test_rotation_invariance(self):
        physics.check_rotation_invariance(self.potential())

    def test_image_invariance(self):
        physics.check_image_invariance(self.potential())

    def test_small_cell_images(self):
        physics.check_small_cell_images(self.potential())

    def test_extensivity(self):
        physics.check_extensivity(self.potential())

    def test_cutoff_smoothness(self):
        physics.check_cutoff_smoothness(self.potential())

    def test_float32_matches_float64(self):
        physics.check_float32_matches_float64(self.potential())

    def test_nve(self):
        physics.check_nve(self.potential())

    def test_save_load(self):
        physics.check_save_load(self.potential())

    def test_short_range_repulsion(self):
        physics.check_short_range_repulsion(self.potential())
