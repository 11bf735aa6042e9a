"""Energy, forces and stress are continuous as a neighbour crosses the cutoff."""

import numpy as np
import pytest
from ase import Atoms

from conftest import build_potential, calc64


def cluster_with_probe(distance, cutoff):
    """A rattled 4-atom cluster in a periodic box (so stress exists) and a probe atom whose distance to
    atom 0 is ``distance``; all other probe distances stay outside the cutoff."""
    base = Atoms(
        "CuAuCuCu",
        positions=[[0.0, 0.0, 0.0], [-2.3, 0.4, 0.3], [-1.1, 2.1, -0.4], [-1.0, -1.2, 1.9]],
    )
    probe = Atoms("Au", positions=[[distance, 0.0, 0.0]])
    atoms = base + probe
    atoms.positions += 10.0
    atoms.cell = np.eye(3) * 30.0  # much larger than 2 r_c: no periodic interactions
    atoms.pbc = True
    assert np.linalg.norm(atoms.positions[1:4] - atoms.positions[4], axis=1).min() > cutoff
    return atoms


def props(potential, atoms):
    atoms.calc = calc64(potential)
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()


def test_continuity_across_cutoff(potential64):
    rc = potential64.cutoff
    e_out, f_out, s_out = props(potential64, cluster_with_probe(rc + 1e-3, rc))
    # Beyond the cutoff the probe does not interact at all.
    assert np.abs(f_out[4]).max() == 0.0
    e_far, f_far, s_far = props(potential64, cluster_with_probe(rc + 0.5, rc))
    assert e_out == pytest.approx(e_far, rel=1e-13, abs=1e-13)

    # Just inside: with a C² envelope (p = 5), E − E_out ~ δ³ and F ~ δ², so both vanish at r_c.
    deltas = [1e-2, 1e-3, 1e-4]
    d_e, d_f, d_s = [], [], []
    for delta in deltas:
        e, f, s = props(potential64, cluster_with_probe(rc - delta, rc))
        d_e.append(abs(e - e_out))
        d_f.append(np.abs(f[4]).max())
        d_s.append(np.abs(s - s_out).max())
    assert d_e[0] > 0 and d_f[0] > 0, "the probe does not interact inside the cutoff"
    for k in range(2):  # each 10× step closer to r_c shrinks the jumps by ≳ 10² (force) / 10³ (energy)
        assert d_e[k + 1] <= d_e[k] / 300 + 1e-14, d_e
        assert d_f[k + 1] <= d_f[k] / 30 + 1e-14, d_f
        assert d_s[k + 1] <= d_s[k] / 30 + 1e-14, d_s


def test_scan_is_smooth(potential64):
    """Fine scan through the cutoff: no jumps between neighbouring points of E, F and σ."""
    assert_smooth_scan(potential64, potential64.cutoff)


@pytest.mark.parametrize("arch", ["platonic-density-reach", "equiformer-v3-gate-sepnorm"])
def test_scan_through_the_attention_cutoff_is_smooth(arch):
    """A model whose density sums or embedded-atom term reach further than its attention
    (``attention_cutoff`` < ``cutoff``) drops the edges beyond ``attention_cutoff`` from attention: E, F
    and σ stay smooth as a neighbour crosses it, and the neighbour still counts between the two radii
    (through the density sums or the term)."""
    potential = build_potential(arch)
    rc, ra = potential.cutoff, potential.model.attention_cutoff
    assert ra < rc
    assert_smooth_scan(potential, ra)
    e_between, f_between, _ = props(potential, cluster_with_probe(0.5 * (ra + rc), rc))
    e_far, _, _ = props(potential, cluster_with_probe(rc + 0.5, rc))
    assert abs(e_between - e_far) > 1e-6 and np.abs(f_between[4]).max() > 1e-6


def assert_smooth_scan(potential64, radius):
    """Scan the probe through ``radius`` (41 points over ±0.05 Å): E, F and σ have no jumps."""
    rc = potential64.cutoff
    distances = np.linspace(radius - 0.05, radius + 0.05, 41)
    step = distances[1] - distances[0]
    vals = [props(potential64, cluster_with_probe(d, rc)) for d in distances]
    energies = np.array([v[0] for v in vals])
    forces = np.array([v[1][4, 0] for v in vals])
    stresses = np.array([v[2] for v in vals])
    # dE/dr = −F_x(probe): the finite-difference slope matches the mean force of the two ends. That is
    # the trapezoid rule, off by h²/12·|F″| ≈ |ΔΔF|/12; allow 3× that (or 1e-3 of the largest force).
    slope = np.diff(energies) / step
    mid_force = 0.5 * (forces[1:] + forces[:-1])
    trapezoid = np.abs(np.diff(forces, 2)).max() / 4
    assert np.abs(slope + mid_force).max() <= max(trapezoid, 1e-3 * np.abs(forces).max()) + 1e-9
    # Consecutive differences are bounded by (max derivative) × step: no discontinuity.
    assert np.abs(np.diff(forces)).max() <= 10 * step * np.abs(np.diff(forces) / step).mean() + 1e-12
    # Every stress component: no difference stands out from both of its neighbours. (A bound by the mean
    # difference, as for the force, is too tight here: the components other than σ_xx are 10⁻⁴ of it and
    # change fastest at the start of the scan; max/mean reached 10.5 for a smooth one.) On a smooth curve
    # neighbouring differences are alike: where the probe's share vanishes like δ³ at r_c, the n-th step
    # inside is (n/(n+1))² of the step before it, so every difference is at most 1.1× its larger
    # neighbour (the first one, (20/19)²). A jump J makes one difference J against O(step·|σ'|) beside it.
    d_stress = np.abs(np.diff(stresses, axis=0))
    zero = np.zeros_like(d_stress[:1])
    larger_neighbour = np.maximum(np.concatenate([zero, d_stress[:-1]]), np.concatenate([d_stress[1:], zero]))
    assert np.all(d_stress <= 3 * larger_neighbour + 1e-14), (d_stress / (larger_neighbour + 1e-300)).max(axis=0)
