"""Energy, forces and stress are continuous as a neighbour crosses the cutoff."""

import numpy as np
import pytest
from ase import Atoms

from conftest import calc64


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
    rc = potential64.cutoff
    distances = np.linspace(rc - 0.05, rc + 0.05, 41)
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
    # Same for every stress component (a fixed fraction of the largest stress is no bound: the probe's
    # share of the stress can fall from its largest value to zero within the 20 steps inside r_c).
    d_stress = np.abs(np.diff(stresses, axis=0))
    assert np.all(d_stress.max(axis=0) <= 10 * d_stress.mean(axis=0) + 1e-12)
