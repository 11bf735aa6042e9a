"""Energy, forces and stress are continuous as a neighbour crosses the cutoff: the smoothness checks of
the shipped physics suite (mlip.testing.physics) on every architecture."""

import numpy as np
import pytest

from mlip.testing import build_potential, check_cutoff_continuity, check_smooth_scan
from mlip.testing.physics import calc64
from mlip.testing.structures import cluster_with_probe


def props(potential, atoms):
    atoms.calc = calc64(potential)
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()


def test_continuity_across_cutoff(potential64):
    check_cutoff_continuity(potential64)


def test_scan_is_smooth(potential64):
    """Fine scan through the cutoff: no jumps between neighbouring points of E, F and σ."""
    check_smooth_scan(potential64, potential64.cutoff)


@pytest.mark.parametrize("arch", ["platonic-density-reach", "equiformer-v3-gate-sepnorm"])
def test_scan_through_the_attention_cutoff_is_smooth(arch):
    """A model whose density sums or embedded-atom term reach further than its attention
    (``attention_cutoff`` < ``cutoff``) drops the edges beyond ``attention_cutoff`` from attention: E, F
    and σ stay smooth as a neighbour crosses it, and the neighbour still counts between the two radii
    (through the density sums or the term)."""
    potential = build_potential(arch)
    rc, ra = potential.cutoff, potential.model.attention_cutoff
    assert ra < rc
    check_smooth_scan(potential, ra)
    e_between, f_between, _ = props(potential, cluster_with_probe(0.5 * (ra + rc), rc))
    e_far, _, _ = props(potential, cluster_with_probe(rc + 0.5, rc))
    assert abs(e_between - e_far) > 1e-6 and np.abs(f_between[4]).max() > 1e-6
