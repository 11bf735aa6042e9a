"""The pytest mixin of the physics suite (mlip.testing.PotentialTests) in the three lines a user writes:
it collects one test per check, each running on the potential of ``make_potential``."""

import pytest

import mlip.testing as mt
from mlip.testing import PotentialTests, build_potential


class TestEmbeddedAtomThroughTheMixin(PotentialTests):
    def make_potential(self):
        return build_potential("embedded-atom")

    test_nve = None  # a check left out (tests/workflows/test_md.py runs it for every architecture)


def test_the_mixin_has_one_test_per_check():
    tests = {name[len("test_"):] for name in dir(PotentialTests) if name.startswith("test_")}
    checks = {name[len("check_"):] for name in mt.__all__ if name.startswith("check_")}
    # check_invariance runs as its four parts; cutoff continuity and the scan as one test (smoothness)
    assert tests == (checks - {"invariance", "cutoff_continuity", "smooth_scan"}) | {"outputs"}


def test_make_potential_must_be_defined_and_float64():
    class Undefined(PotentialTests):
        pass

    with pytest.raises(NotImplementedError, match="must define make_potential"):
        Undefined().potential()

    class Float32(PotentialTests):
        def make_potential(self):
            return build_potential("embedded-atom", dtype=None)

    with pytest.raises(AssertionError, match=r"torch.float32 weights: call .double\(\)"):
        Float32().potential()

    class MissingElements(PotentialTests):
        def make_potential(self):
            return build_potential("embedded-atom", species=["Cu", "Au"])

    with pytest.raises(AssertionError, match="need element"):
        MissingElements().potential()
