"""Harmonic phonons (phonopy): cross-checks against independent calculations, thermodynamics,
imaginary modes, resumable runs, output files, mlip models and input errors.

The reference is ASE's EMT (fcc Cu, equilibrium a ≈ 3.59 Å), which is fast and physical.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk, fcc111, molecule
from ase.calculators.emt import EMT

pytest.importorskip("phonopy")
pytest.importorskip("spglib")

from mlip.workflows.phonons import PhononSettings, run_phonons  # noqa: E402
from mlip.workflows.phonons.harmonic import default_supercell  # noqa: E402
from mlip.workflows.phonons.phonon_result import KB_EV, PLOT_NAMES, PhononResult  # noqa: E402

EMT_PATH = "ase.calculators.emt:EMT"
EV_PER_THZ = 4.135667696e-3  # h in eV/THz (CODATA 2018; phonopy's older constants differ by ~1e-7)
#: m·(2πf)² with m in amu and f in THz, converted to eV/Å²  (1 amu·Å²/ps² = 1.0364e-4 eV)
AMU_A2_PER_PS2_IN_EV = 1.03642697e-4


class CountingEMT(EMT):
    """EMT counting its energy/force evaluations."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def calculate(self, atoms=None, properties=("energy",), system_changes=None):
        self.calls += 1
        kwargs = {} if system_changes is None else {"system_changes": system_changes}
        super().calculate(atoms, properties, **kwargs)


@pytest.fixture(scope="module")
def cu() -> PhononResult:
    """fcc Cu (1-atom primitive cell, a = 3.6 Å), 4×4×4 supercell, not relaxed (the ASE
    cross-check needs the very same structure)."""
    return run_phonons(bulk("Cu", "fcc", a=3.6), EMT_PATH, CU_SETTINGS, progress=False)


#: the settings of the ``cu`` fixture
CU_SETTINGS = PhononSettings(supercell=4, relax=False, mesh=12, temperatures=(0, 1000, 5))


def test_settings_by_keyword_are_the_settings_object(cu):
    by_keyword = run_phonons(bulk("Cu", "fcc", a=3.6), EMT_PATH, supercell=4, relax=False, mesh=12,
                             temperatures=(0, 1000, 5), progress=False)
    assert by_keyword.settings == cu.settings
    np.testing.assert_array_equal(np.concatenate(by_keyword.band_frequencies),
                                  np.concatenate(cu.band_frequencies))
    coarser = run_phonons(bulk("Cu", "fcc", a=3.6), EMT_PATH, CU_SETTINGS, mesh=6, progress=False)
    assert coarser.mesh == [6, 6, 6]  # a keyword overrides the settings object
    assert coarser.settings == {**cu.settings, "mesh": [6, 6, 6]}


def _special_points(result: PhononResult) -> dict:
    """label → (reduced q, frequencies) at the ends of the band-path segments."""
    points = {}
    segments = zip(result.band_segments, result.band_qpoints, result.band_frequencies, strict=True)
    for (start, end), q, f in segments:
        points.setdefault(start, (q[0], f[0]))
        points.setdefault(end, (q[-1], f[-1]))
    return points


def _frozen_phonon_energy(result: PhononResult, qpoint, amplitude=0.01):
    """Energy change (eV) of a 2×2×2 supercell of the primitive cell when the atoms are displaced
    along the lowest mode at ``qpoint`` (which must be commensurate: 2q integer), computed with
    EMT directly, and the harmonic prediction ½ Σ_j m_j ω² |u_j|² from the mode's frequency.

    The symmetric average (E(+u) + E(−u))/2 − E(0) cancels the cubic anharmonic term."""
    prim = result.primitive
    modes = result.phonopy.run_qpoints(np.asarray([qpoint], dtype=float), with_eigenvectors=True)
    freqs, vecs = modes.frequencies[0], modes.eigenvectors[0]
    k = int(np.argmin(freqs))
    e = vecs[:, k].reshape(len(prim), 3)
    e = e * np.exp(-1j * np.angle(e.flat[np.argmax(np.abs(e))]))  # global phase: make it real
    sc = prim.repeat((2, 2, 2))
    frac = np.linalg.solve(prim.cell.array.T, sc.positions.T).T  # n + fractional position
    masses = sc.get_masses()
    phase = np.exp(2j * np.pi * frac @ np.asarray(qpoint, dtype=float))
    u = np.real(e[np.arange(len(sc)) % len(prim)] * phase[:, None]) / np.sqrt(masses)[:, None]
    u *= amplitude / np.abs(u).max()

    def energy(shift):
        atoms = sc.copy()
        atoms.positions += shift
        atoms.calc = EMT()
        return atoms.get_potential_energy()

    delta = 0.5 * (energy(u) + energy(-u)) - energy(0 * u)
    omega2 = np.sign(freqs[k]) * (2 * np.pi * freqs[k]) ** 2  # (rad/ps)², negative when imaginary
    predicted = 0.5 * omega2 * AMU_A2_PER_PS2_IN_EV * float(np.sum(masses[:, None] * u**2))
    return delta, predicted, freqs[k]


# ----------------------------------------------------------------------------- cross-checks
def test_matches_ase_finite_difference_phonons(cu, tmp_path):
    """phonopy frequencies from the workflow agree with ASE's own finite-difference phonons
    (``ase.phonons.Phonons``: central differences ±0.01 Å on every atom and direction, no symmetry)
    for the same EMT crystal and 4×4×4 supercell.

    At Γ, X, L and W (commensurate with the 4×4×4 supercell: 4q is a lattice vector) both methods
    Fourier-transform the same supercell force constants with identical phase factors, so they
    differ only by the finite-difference scheme (phonopy: one +0.01 Å displacement mapped by
    symmetry; ASE: ±0.01 Å), an O(d²) anharmonic effect of ~1e-4 relative; 1e-3 leaves a margin
    of 10 (off the commensurate points the two codes treat periodic images differently and differ
    by ~0.5%, so those are not compared)."""
    from ase.phonons import Phonons

    atoms = bulk("Cu", "fcc", a=3.6)
    ph = Phonons(atoms, EMT(), supercell=(4, 4, 4), delta=0.01, name=str(tmp_path / "ase-ph"))
    ph.run()
    ph.read(acoustic=True)
    points = _special_points(cu)
    assert {"Γ", "X", "L", "W"} <= set(points)
    recip_prim = cu.primitive.cell.reciprocal()  # rows b_i (no 2π)
    for label in ("Γ", "X", "L", "W"):
        q_red, f_wf = points[label]
        q_ase = (q_red @ recip_prim) @ atoms.cell.array.T  # the same q in ASE's basis of atoms.cell
        f_ase = np.sort(ph.band_structure([q_ase])[0] / EV_PER_THZ)
        np.testing.assert_allclose(np.sort(f_wf), f_ase, rtol=1e-3, atol=1e-3, err_msg=label)
    # the band structure arrays and the phonopy object agree with each other
    np.testing.assert_allclose(cu.frequencies_at(points["X"][0]), points["X"][1], atol=1e-10)


def test_band_structure_shape_and_acoustic_modes(cu):
    """3 branches for the 1-atom primitive cell; acoustic frequencies vanish at Γ (the symmetrised
    force constants obey the acoustic sum rule to ~1e-7 THz; 1e-3 THz is far below any optical
    or zone-boundary frequency of Cu, ~3-8 THz)."""
    assert cu.n_atoms_primitive == 1 and cu.n_bands == 3
    assert cu.band_path == "GXWKGLUWLK,UX"
    assert len(cu.band_segments) == len(cu.band_frequencies) == 10
    for q, d, f in zip(cu.band_qpoints, cu.band_distances, cu.band_frequencies, strict=True):
        assert f.shape == (len(d), 3) and q.shape == (len(d), 3)
        assert np.all(np.diff(d) >= 0)
    gamma = _special_points(cu)["Γ"]
    np.testing.assert_allclose(gamma[0], 0.0)
    assert np.abs(gamma[1]).max() < 1e-3
    # the X point of fcc EMT Cu: two degenerate transverse modes below the longitudinal one
    f_x = np.sort(_special_points(cu)["X"][1])
    assert abs(f_x[0] - f_x[1]) < 1e-6 and f_x[2] > f_x[1] + 1.0
    assert not cu.has_imaginary_modes and cu.lowest_frequency > -1e-3
    # DOS: the tetrahedron DOS integrates to the number of branches (3 per primitive cell), up to
    # the trapezoid rule on phonopy's frequency grid (observed 4e-4)
    trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2 has only trapz
    assert trapezoid(cu.dos, cu.dos_frequencies) == pytest.approx(3.0, rel=5e-3)


def test_frozen_phonon_energy_matches_frequency(cu):
    """Displacing the atoms of a 2×2×2 supercell along the X-point transverse mode raises the EMT
    energy by ½ m ω² u², as the workflow's frequency predicts (X is commensurate with 2×2×2, and
    with the cubic term cancelled the anharmonic error is O(u²) ~ 1e-4 at u = 0.01 Å; observed
    5e-5, bound 2e-3)."""
    delta, predicted, f = _frozen_phonon_energy(cu, [0.5, 0.0, 0.5])
    assert f > 3.0
    assert delta > 0
    assert delta == pytest.approx(predicted, rel=2e-3)


def test_conventional_cell_and_nondiagonal_supercell_agree():
    """The conventional 4-atom cell with a 2×2×2 supercell and the 1-atom primitive cell with the
    equivalent non-diagonal supercell matrix build the same 32-atom supercell: same primitive cell,
    same bands, same per-atom thermodynamics; per-cell values scale with the cell's atom count."""
    kw = dict(relax=False, mesh=8, temperatures=(0, 600, 100), progress=False, band_npoints=11)
    conv = run_phonons(bulk("Cu", "fcc", a=3.6, cubic=True), EMT_PATH, supercell=2, **kw)
    prim = run_phonons(bulk("Cu", "fcc", a=3.6), EMT_PATH,
                       supercell=[[-2, 2, 2], [2, -2, 2], [2, 2, -2]], **kw)
    assert conv.n_supercell_atoms == prim.n_supercell_atoms == 32
    assert conv.n_atoms == 4 and prim.n_atoms == 1
    assert conv.n_atoms_primitive == prim.n_atoms_primitive == 1 and conv.n_bands == 3
    assert conv.band_path == prim.band_path
    for a, b in zip(conv.band_frequencies, prim.band_frequencies, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(conv.free_energy_per_atom, prim.free_energy_per_atom, atol=1e-9)
    np.testing.assert_allclose(conv.heat_capacity, 4 * prim.heat_capacity, rtol=1e-8)
    assert conv.zero_point_energy == pytest.approx(4 * prim.zero_point_energy, rel=1e-8)


# ----------------------------------------------------------------------------- thermodynamics
def _mesh_modes(result: PhononResult):
    """Frequencies (THz) and normalised weights of the mesh modes, the 3 Γ acoustic ones left out."""
    mesh = result.phonopy.mesh
    f = np.asarray(mesh.frequencies, dtype=float)
    w = np.repeat(np.asarray(mesh.weights, dtype=float)[:, None], f.shape[1], axis=1)
    w = w / w[:, 0].sum()
    keep = np.abs(f) > 1e-3  # the translations at Γ (|f| ~ 1e-7 THz) are not vibrations
    assert (~keep).sum() == 3
    return f[keep], w[keep]


def test_thermal_properties(cu):
    n = cu.n_atoms
    t = cu.temperatures
    assert t[0] == 0 and t[-1] == 1000
    # h and k_B as phonopy has them (older CODATA values than ours, which differ by up to 6e-7):
    # the checks below test our unit conversions, not the constants.
    from phonopy.physical_units import get_physical_units

    h_ev_thz, kb = get_physical_units().THzToEv, get_physical_units().KB
    # F(0 K) is the zero-point energy Σ hν/2 (per primitive cell = per unit cell here).
    f, w = _mesh_modes(cu)
    zpe = float(np.sum(w * 0.5 * h_ev_thz * f))
    assert cu.zero_point_energy == pytest.approx(zpe, rel=1e-9)
    assert cu.free_energy[0] == pytest.approx(cu.zero_point_energy, rel=1e-12)
    assert cu.entropy[0] == pytest.approx(0.0, abs=1e-12)
    assert cu.heat_capacity[0] == pytest.approx(0.0, abs=1e-12)
    # F, S and C_V from the harmonic-oscillator sums over the mesh modes (x = hν/k_BT), in eV and
    # eV/K per unit cell: checks phonopy's units (kJ/mol, J/K/mol) and our conversions.
    for temp in (50.0, 300.0, 1000.0):
        k = int(np.argmin(np.abs(t - temp)))
        x = h_ev_thz * f / (kb * temp)
        free = float(np.sum(w * (0.5 * h_ev_thz * f + kb * temp * np.log(-np.expm1(-x)))))
        entropy = kb * float(np.sum(w * (x / np.expm1(x) - np.log(-np.expm1(-x)))))
        cv = kb * float(np.sum(w * x**2 * np.exp(x) / np.expm1(x) ** 2))
        assert cu.free_energy[k] == pytest.approx(free, rel=1e-8)
        assert cu.entropy[k] == pytest.approx(entropy, rel=1e-8)
        assert cu.heat_capacity[k] == pytest.approx(cv, rel=1e-8)
    # Dulong–Petit: C_V → 3 k_B per atom; for a Debye temperature θ ≈ 340 K the high-temperature
    # expansion 1 − (θ/T)²/20 gives 0.994 at 1000 K, so within 1% (and below 3 k_B).
    ratio = cu.heat_capacity_per_atom[-1] / (3 * KB_EV)
    assert 0.99 < ratio < 1.0
    # S = −∂F/∂T and C_V = T ∂S/∂T (central differences on the 5 K grid: truncation error
    # (h²/6)·F'''/F', largest near 100 K; observed 1.4e-4 and 4e-4 relative, bounds 1e-3 and 3e-3).
    hi = t >= 100
    ds = -np.gradient(cu.free_energy, t)
    np.testing.assert_allclose(ds[hi][1:-1], cu.entropy[hi][1:-1], rtol=1e-3)
    cv = t * np.gradient(cu.entropy, t)
    np.testing.assert_allclose(cv[hi][1:-1], cu.heat_capacity[hi][1:-1], rtol=3e-3)
    # per atom = per cell / atoms
    np.testing.assert_allclose(cu.entropy_per_atom, cu.entropy / n)


# ----------------------------------------------------------------------------- imaginary modes
def test_imaginary_modes_of_bcc_copper():
    """bcc Cu is a saddle point (the Bain path to fcc): after a symmetry-preserving relaxation it
    keeps Im-3m and has imaginary modes (EMT: about −1.1 THz at N). Verified independently: a
    frozen N-point phonon in a 2×2×2 supercell *lowers* the EMT energy, by ½ m ω² u² with ω² < 0
    (within 2%: the quartic term matters more for a soft mode; observed 0.6% at u = 0.01 Å)."""
    result = run_phonons(bulk("Cu", "bcc", a=2.87), EMT_PATH, supercell=4, mesh=8, band_npoints=21,
                         progress=False)
    relaxation = result.relaxation
    assert relaxation["converged"] and relaxation["n_steps"] > 0
    assert relaxation["spacegroup_initial"] == relaxation["spacegroup_final"] == "Im-3m (229)"
    assert not relaxation["symmetry_broken"]
    assert result.has_imaginary_modes
    assert result.lowest_frequency < -0.5
    n_point = _special_points(result)["N"]
    assert n_point[1].min() < -0.5
    delta, predicted, f = _frozen_phonon_energy(result, n_point[0])
    assert f < -0.5
    assert delta < 0
    assert delta == pytest.approx(predicted, rel=2e-2)
    d = result.to_dict()["imaginary_modes"]
    assert d["has_imaginary_modes"] is True and d["lowest_frequency_THz"] < -0.5


def test_imaginary_tolerance():
    """Only frequencies below −imaginary_tol count as imaginary; the lowest one is always reported.
    Symmetrised fcc force constants have no negative frequency beyond ~1e-7 THz (so even a zero
    tolerance passes); bcc's −1.1 THz soft mode is ignored only with a tolerance above it."""
    kw = dict(supercell=3, relax=False, mesh=6, band_npoints=5, progress=False)
    fcc = run_phonons(bulk("Cu", "fcc", a=3.6), EMT_PATH, imaginary_tol=0.0, **kw)
    assert fcc.lowest_frequency > -1e-6
    assert fcc.has_imaginary_modes == (fcc.lowest_frequency < 0)
    bcc = run_phonons(bulk("Cu", "bcc", a=2.855), EMT_PATH, imaginary_tol=2.0, **kw)
    assert bcc.lowest_frequency < -0.5 and not bcc.has_imaginary_modes
    assert bcc.to_dict()["imaginary_modes"]["tolerance_THz"] == 2.0


def test_residual_forces_are_subtracted(offset_emt):
    """Forces on the undisplaced supercell are subtracted (phonopy's --fz): EMT with a fixed force
    added on every atom gives EMT's phonons; kept, they change the bands."""
    kw = dict(supercell=3, relax=False, mesh=6, band_npoints=5, progress=False)
    exact = run_phonons(bulk("Cu", "fcc", a=3.6), EMT_PATH, **kw)
    offset = run_phonons(bulk("Cu", "fcc", a=3.6), offset_emt(), **kw)
    kept = run_phonons(bulk("Cu", "fcc", a=3.6), offset_emt(), subtract_residual_forces=False, **kw)
    bands = {name: np.concatenate(r.band_frequencies) for name, r in
             (("exact", exact), ("offset", offset), ("kept", kept))}
    # Γ acoustic modes are √(eigenvalue noise ~1e-14): 1e-7 THz
    np.testing.assert_allclose(bands["offset"], bands["exact"], atol=1e-6)
    assert np.abs(bands["kept"] - bands["exact"]).max() > 0.1  # THz
    assert offset.residual_force_max == pytest.approx(np.linalg.norm(offset_emt.offset(27), axis=1).max())
    assert exact.residual_force_max < 1e-10 and kept.residual_force_max is None
    assert offset.to_dict()["supercell"]["residual_force_max_eV_per_A"] == offset.residual_force_max
    assert offset.settings["subtract_residual_forces"] and not kept.settings["subtract_residual_forces"]


# ----------------------------------------------------------------------------- files and resume
def test_resume_files_and_cache_checks(tmp_path):
    out = tmp_path / "run"
    kw = dict(supercell=4, mesh=8, band_npoints=11, temperatures=(0, 500, 50), progress=False)
    calc = CountingEMT()
    first = run_phonons(bulk("Cu", "fcc", a=3.65), calc, out_dir=out, **kw)
    assert calc.calls > 10  # relaxation steps + the displaced supercell
    relaxation = first.relaxation
    assert relaxation["converged"] and relaxation["n_steps"] > 0
    assert relaxation["spacegroup_initial"] == relaxation["spacegroup_final"] == "Fm-3m (225)"
    assert not first.has_imaginary_modes
    # the relaxed lattice constant is EMT's equilibrium: zero stress (fmax 1e-4 eV/Å)
    relaxed = first.atoms.copy()
    relaxed.calc = EMT()
    assert np.abs(relaxed.get_stress()).max() < 1e-4
    # a sanity range: EMT Cu's equilibrium is 3.59 Å, the start 3.65 Å (the exact check is the stress above)
    assert first.atoms.cell.cellpar()[0] * math.sqrt(2) == pytest.approx(3.59, abs=0.01)

    # files
    for name in PLOT_NAMES:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    doc = json.loads((out / "phonons.json").read_text())
    for key in ("model", "settings", "structure", "spacegroup", "primitive", "relaxation", "supercell",
                "band_structure", "dos", "thermal_properties", "imaginary_modes"):
        assert key in doc
    assert doc["spacegroup"] == "Fm-3m (225)"
    assert doc["supercell"]["n_atoms"] == 64
    assert doc["band_structure"]["segments"][0]["labels"] == ["Γ", "X"]
    assert np.array(doc["band_structure"]["segments"][0]["frequencies_THz"]).shape == (11, 3)
    tp = doc["thermal_properties"]
    assert len(tp["temperatures_K"]) == len(tp["free_energy_eV_per_atom"]) == 11
    assert tp["zero_point_energy_eV_per_atom"] == pytest.approx(first.zero_point_energy_per_atom)
    assert doc["imaginary_modes"]["has_imaginary_modes"] is False
    assert doc["settings"]["displacement_A"] == 0.01

    # a rerun recomputes nothing (relaxed structure and forces come from the cache) and agrees
    calc.calls = 0
    second = run_phonons(bulk("Cu", "fcc", a=3.65), calc, out_dir=out, **kw)
    assert calc.calls == 0
    assert second.to_dict() == first.to_dict()

    # a cache made for another supercell, or with another model, is refused
    with pytest.raises(ValueError, match="different structures"):
        run_phonons(bulk("Cu", "fcc", a=3.65), calc, out_dir=out, **{**kw, "supercell": 5})
    with pytest.raises(ValueError, match="another model"):
        run_phonons(bulk("Cu", "fcc", a=3.65), EMT(), out_dir=out, **kw)


def test_interrupted_run_resumes(tmp_path):
    """Forces saved before a crash are reused: only the missing supercells are computed."""

    class FlakyEMT(CountingEMT):
        """Crashes on the displaced supercell after ``crash_after`` of them (simulated OOM)."""

        def __init__(self, crash_after=None):
            super().__init__()
            self.crash_after = crash_after

        def calculate(self, atoms=None, properties=("energy",), system_changes=None):
            if self.crash_after is not None and self.calls >= self.crash_after:
                raise RuntimeError("simulated crash")
            super().calculate(atoms, properties, system_changes)

    # L1_0 CuAu (P4/mmm, 2-atom primitive cell): more than one symmetry-distinct displacement (phonopy: 2)
    atoms = Atoms("Cu2Au2", scaled_positions=[[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]],
                  cell=[3.8, 3.8, 3.7], pbc=True)
    kw = dict(supercell=2, relax=False, mesh=4, band_npoints=3, progress=False)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_phonons(atoms, FlakyEMT(crash_after=1), out_dir=tmp_path, **kw)
    assert len(list((tmp_path / "cache" / "fc2").glob("forces_*.npy"))) == 1
    calc = FlakyEMT()  # same model (class and parameters) as the crashed run
    result = run_phonons(atoms, calc, out_dir=tmp_path, **kw)
    assert result.n_displacements >= 2  # so that the crash left some undone
    assert calc.calls == result.n_displacements  # the n − 1 missing displaced supercells, the undisplaced one
    assert result.n_bands == 6 and result.n_atoms_primitive == 2


# ----------------------------------------------------------------------------- mlip models
@pytest.fixture(scope="module")
def tiny_cu_potential():
    from mlip.models import create_model

    return create_model("platonic", species=["Cu"], cutoff=4.0, seed=0, channels=4, num_layers=1,
                        num_heads=1, head_dim=2)


def test_mlip_model_supercell_too_small_for_cutoff(tiny_cu_potential):
    atoms = bulk("Cu", "fcc", a=3.6)  # primitive cell: perpendicular width 2.08 Å per repeat
    with pytest.raises(ValueError, match=r"cutoff of 4 Å.*supercell=\(4, 4, 4\)"):
        run_phonons(atoms, tiny_cu_potential, supercell=2, relax=False, progress=False)
    # the suggested supercell works; an untrained model gives unphysical but finite numbers
    result = run_phonons(atoms, tiny_cu_potential, supercell=(4, 4, 4), relax=False, mesh=4,
                         band_npoints=3, temperatures=(0, 300, 100), progress=False)
    assert result.n_bands == 3 and result.settings["model_cutoff_A"] == 4.0
    assert all(np.all(np.isfinite(f)) for f in result.band_frequencies)
    assert np.abs(_special_points(result)["Γ"][1]).max() < 1e-3  # acoustic sum rule holds anyway
    # default supercell: widths ≥ max(12 Å, 2 × cutoff)
    assert default_supercell(atoms, 12.0) == (6, 6, 6)


def test_mlip_calculator_in_float32_warns(tiny_cu_potential):
    from mlip import MLIPCalculator

    calc = MLIPCalculator(tiny_cu_potential, device="cpu", dtype="float32")
    with pytest.warns(RuntimeWarning, match="float64"):
        run_phonons(bulk("Cu", "fcc", a=3.6), calc, supercell=4, relax=False, mesh=4, band_npoints=3,
                    temperatures=(0, 100, 100), progress=False)


def test_mlip_model_unknown_element(tiny_cu_potential):
    with pytest.raises(ValueError, match="Au"):
        run_phonons(bulk("Au", "fcc", a=4.08), tiny_cu_potential, supercell=4, relax=False,
                    progress=False)


def test_default_supercell():
    prim = bulk("Cu", "fcc", a=3.6)  # widths a/√3 = 2.078 Å
    assert default_supercell(prim, 12.0) == (6, 6, 6)  # 5 × 2.078 = 10.4 < 12 ≤ 12.5
    assert default_supercell(bulk("Cu", "fcc", a=3.6, cubic=True), 12.0) == (4, 4, 4)
    tetragonal = Atoms("Cu", cell=[3.0, 3.0, 5.0], pbc=True)
    assert default_supercell(tetragonal, 10.0) == (4, 4, 2)


# ----------------------------------------------------------------------------- input errors
def _slab():
    s = fcc111("Cu", size=(2, 2, 3), vacuum=5.0)
    s.pbc = [True, True, False]
    return s


@pytest.mark.parametrize("atoms, kwargs, match", [
    (molecule("H2O"), {}, "periodic"),
    (_slab(), {}, "periodic"),
    (Atoms(cell=[3, 3, 3], pbc=True), {}, "no atoms"),
    (bulk("Cu"), {"supercell": "abc"}, "supercell"),
    (bulk("Cu"), {"supercell": 0}, "singular"),
    (bulk("Cu"), {"supercell": [[1, 0, 0], [0, 1, 0]]}, "supercell"),
    (bulk("Cu"), {"supercell": [[0, 1, 0], [1, 0, 0], [0, 0, 1]]}, "left-handed"),
    (bulk("Cu"), {"displacement": 0.0}, "displacement"),
    (bulk("Cu"), {"displacement": -0.01}, "displacement"),
    (bulk("Cu"), {"displacement": float("nan")}, "displacement"),
    (bulk("Cu"), {"mesh": 0}, "mesh"),
    (bulk("Cu"), {"mesh": (4, 4)}, "mesh"),
    (bulk("Cu"), {"mesh": -5.0}, "mesh"),
    (bulk("Cu"), {"temperatures": (500, 100, 10)}, "temperatures"),
    (bulk("Cu"), {"temperatures": (0, 100, 0)}, "temperatures"),
    (bulk("Cu"), {"temperatures": 300}, "temperatures"),
    (bulk("Cu"), {"band_npoints": 1}, "band_npoints"),
    (bulk("Cu"), {"band_npoints": 2.5}, "band_npoints"),
    (bulk("Cu"), {"min_width": 0.0}, "min_width"),
    (bulk("Cu"), {"imaginary_tol": -0.1}, "imaginary_tol"),
    (bulk("Cu"), {"fmax": 0.0}, "fmax"),
])
def test_bad_input(atoms, kwargs, match):
    calc = CountingEMT()
    with pytest.raises(ValueError, match=match):
        run_phonons(atoms, calc, progress=False, **kwargs)
    assert calc.calls == 0  # refused before any calculation


def test_unknown_model_name():
    with pytest.raises(ValueError, match="unknown model"):
        run_phonons(bulk("Cu"), "no-such-model", progress=False)
