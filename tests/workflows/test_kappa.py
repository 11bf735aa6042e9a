"""Lattice thermal conductivity (phono3py) and the κ_SRME/SRE/SRD metrics, with EMT forces.

EMT Cu is fast (≈ 2 s per κ on a 32-atom supercell with an 11³ mesh), so every number the
workflow produces is checked against an independent, minimal phono3py script.
"""

from __future__ import annotations

import gzip
import json
import warnings

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk
from ase.calculators.calculator import Calculator, all_changes
from ase.calculators.emt import EMT

phono3py = pytest.importorskip("phono3py")

from mlip.workflows.phonons import KappaSettings  # noqa: E402
from mlip.workflows.phonons.kappa import (  # noqa: E402
    MIN_WIDTH_NN_FACTOR,
    KappaResult,
    calculator_cutoff,
    check_supercell,
    has_imaginary_modes,
    load_kappa,
    nearest_neighbor_distance,
    reduced_widths,
    run_kappa,
    suggest_supercell,
)
from mlip.workflows.phonons.kappa_metrics import (  # noqa: E402
    kappa_average,
    kappa_scores,
    kappa_srd,
    kappa_sre,
    kappa_srme,
    kappa_srme_arrays,
    mean_kappa_scores,
    mode_kappa_total,
)

EMT_SPEC = "ase.calculators.emt:EMT"
A_CU = 3.61  # Å, a little above EMT's 3.59: unrelaxed runs need no relaxation to be stable
CONV_IN_PRIM = np.array([[-1, 1, 1], [1, -1, 1], [1, 1, -1]])  # conventional fcc cell from the primitive


def cu_conventional() -> Atoms:
    return bulk("Cu", "fcc", a=A_CU, cubic=True)


# ----------------------------------------------------------------------------- independent reference
def displaced_phono3py(atoms: Atoms, supercell: int, mesh: int = 5):
    """phono3py's object for ``atoms`` × ``supercell`` (fc2 and fc3 alike) with its displacements at 0.03 Å,
    written without any mlip code; no force is computed yet."""
    from phono3py import Phono3py
    from phonopy.structure.atoms import PhonopyAtoms

    unit = PhonopyAtoms(symbols=atoms.get_chemical_symbols(), cell=atoms.cell.array,
                        scaled_positions=atoms.get_scaled_positions())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ph3 = Phono3py(unit, supercell_matrix=np.eye(3, dtype=int) * supercell,
                       phonon_supercell_matrix=np.eye(3, dtype=int) * supercell,
                       primitive_matrix="auto", symprec=1e-5)
    ph3.mesh_numbers = [mesh] * 3
    ph3.generate_displacements(distance=0.03)
    return ph3


def displacement_counts(atoms: Atoms, supercell: int) -> tuple[int, int]:
    """How many displaced supercells phono3py itself makes for fc2 and for fc3 (the workflow must run
    exactly these, each once)."""
    ph3 = displaced_phono3py(atoms, supercell)
    return len(ph3.phonon_supercells_with_displacements), len(ph3.supercells_with_displacements)


def direct_phono3py(atoms: Atoms, supercell: int, mesh: int):
    """A minimal phono3py run written without any mlip code: EMT forces less those of the undisplaced
    supercell (phonopy's --fz, as the workflow does), fc2/fc3 symmetrised."""
    ph3 = displaced_phono3py(atoms, supercell, mesh)

    def forces(cells, perfect):
        out = []
        for cell in [perfect, *cells]:
            a = Atoms(cell.symbols, cell=cell.cell, scaled_positions=cell.scaled_positions, pbc=True)
            a.calc = EMT()
            out.append(a.get_forces())
        return np.array(out[1:]) - out[0]

    ph3.phonon_forces = forces(ph3.phonon_supercells_with_displacements, ph3.phonon_supercell)
    ph3.forces = forces(ph3.supercells_with_displacements, ph3.supercell)
    ph3.produce_fc2()
    ph3.symmetrize_fc2()
    ph3.produce_fc3()
    ph3.symmetrize_fc3()
    ph3.init_phph_interaction()
    return ph3


def direct_default_protocol(ph3):
    """phono3py's conductivity with the workflow's default protocol (Wigner, isotopes, 300 K)."""
    ph3.run_thermal_conductivity(temperatures=[300], is_isotope=True, boundary_mfp=1e6,
                                 transport_type="SMM19")
    return ph3.thermal_conductivity


def voigt(kappa33: np.ndarray) -> np.ndarray:
    k = kappa33
    return np.array([k[0, 0], k[1, 1], k[2, 2], k[1, 2], k[0, 2], k[0, 1]])


class CountingEMT(Calculator):
    """EMT that counts its calls (unit cells and supercells apart) and can fail like a killed run."""

    implemented_properties = ["energy", "free_energy", "forces", "stress"]

    def __init__(self, fail_at_supercell=None):
        super().__init__()
        self.fail_at = fail_at_supercell
        self.unit_calls = 0
        self.supercell_calls = 0

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        if len(self.atoms) > 4:
            if self.fail_at is not None and self.supercell_calls >= self.fail_at:
                raise RuntimeError("simulated kill")
            self.supercell_calls += 1
        else:
            self.unit_calls += 1
        # A plain copy without constraints: the caller's Atoms applies FixSymmetry once, as with EMT.
        a = Atoms(self.atoms.numbers, positions=self.atoms.positions, cell=self.atoms.cell,
                  pbc=self.atoms.pbc)
        a.calc = EMT()
        energy = a.get_potential_energy()
        self.results = {"energy": energy, "free_energy": energy, "forces": a.get_forces(),
                        "stress": a.get_stress()}


@pytest.fixture(scope="module")
def wigner11():
    """The workflow on unrelaxed conventional Cu × 2, mesh 11³, Wigner (the default method)."""
    return run_kappa(cu_conventional(), EMT_SPEC, WIGNER11, progress=False, raise_errors=True)


#: the settings of the ``wigner11`` fixture
WIGNER11 = KappaSettings(fc2_supercell=2, fc3_supercell=2, mesh=11, relax=False)


def test_settings_by_keyword_are_the_settings_object(wigner11, rta11):
    by_keyword = run_kappa(cu_conventional(), EMT_SPEC, fc2_supercell=2, fc3_supercell=2, mesh=11,
                           relax=False, progress=False, raise_errors=True)
    assert by_keyword.settings == wigner11.settings
    np.testing.assert_array_equal(by_keyword.kappa, wigner11.kappa)
    # rta11 passes its settings by keyword: the object with a keyword on top is the same
    overridden = run_kappa(cu_conventional(), EMT_SPEC, WIGNER11, method="rta", progress=False,
                           raise_errors=True)
    assert overridden.settings == rta11.settings
    np.testing.assert_array_equal(overridden.kappa, rta11.kappa)


@pytest.fixture(scope="module")
def rta11():
    """The same with plain RTA."""
    return run_kappa(cu_conventional(), EMT_SPEC, fc2_supercell=2, fc3_supercell=2, mesh=11, relax=False,
                     method="rta", progress=False, raise_errors=True)


@pytest.fixture(scope="module")
def direct11():
    return direct_phono3py(cu_conventional(), 2, 11)


# ----------------------------------------------------------------------------- against phono3py
def test_wigner_matches_direct_phono3py(wigner11, direct11):
    tc = direct_default_protocol(direct11)
    r = wigner11
    assert r.status == "ok" and r.method == "wigner" and r.n_atoms_primitive == 1
    # Same forces, same phono3py calls: the workflow adds no error (1e-6 leaves room for nothing
    # but summation-order round-off).
    np.testing.assert_allclose(voigt(r.kappa[0]), tc.kappa[0, 0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(voigt(r.kappa_particle[0]), tc.kappa_intra[0, 0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(voigt(r.kappa_coherence[0]), tc.kappa_inter[0, 0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(r.grid_weights, tc.grid_weights)
    np.testing.assert_allclose(r.frequencies, tc.frequencies, rtol=1e-9, atol=1e-9)
    # Only a sanity range beyond that exact check: phono3py's value itself moves between releases (11.55
    # W/(m·K) with an earlier phono3py, 11.53 with 4.10.0). EMT Cu here is about 12 W/(m·K); a unit or
    # normalisation error (a factor 2π of THz against rad/ps, per grid point against per weight, per
    # conventional against per primitive cell) moves κ by a factor of 2 or more and leaves this range.
    assert 6 < r.kappa_average[0] < 24


def test_wigner_parts_isotropy_and_mode_sums(wigner11):
    r = wigner11
    kappa = r.kappa[0]
    scale = float(np.trace(kappa)) / 3
    # Wigner total = populations + coherences (phono3py's kappa_inter is kappa − kappa_intra).
    np.testing.assert_allclose(r.kappa, r.kappa_particle + r.kappa_coherence, rtol=1e-12, atol=1e-12 * scale)
    # The coherence term of a monatomic metal is a small positive correction (2% here).
    coherence = float(np.trace(r.kappa_coherence[0])) / 3
    assert 0 < coherence < 0.05 * scale
    # Cubic crystal: isotropic tensor (off-diagonals are round-off, ~1e-16 of κ).
    assert np.abs(kappa - np.diag(np.diagonal(kappa))).max() < 1e-10 * scale
    np.testing.assert_allclose(np.diagonal(kappa), scale, rtol=1e-10)
    # Mode-resolved κ sums to κ (multiplicity included, normalised by the mesh size).
    n_mesh = int(r.grid_weights.sum())
    assert n_mesh == 11**3
    np.testing.assert_allclose(r.mode_kappa[0].sum(axis=(0, 1)) / n_mesh, voigt(kappa), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(r.mode_kappa_particle[0].sum(axis=(0, 1)) / n_mesh, voigt(r.kappa_particle[0]),
                               rtol=1e-10, atol=1e-12)
    n_q, n_band = r.frequencies.shape
    assert r.mode_kappa.shape == (1, n_q, n_band, 6) and r.heat_capacities.shape == (1, n_q, n_band)
    assert r.gamma.shape == (1, n_q, n_band) and np.all(r.gamma[0][r.frequencies > 0.1] > 0)


@pytest.mark.parametrize("method", ["rta", "lbte"])
def test_rta_and_lbte_match_direct_phono3py(method):
    atoms = cu_conventional()
    r = run_kappa(atoms, EMT_SPEC, fc2_supercell=2, fc3_supercell=2, mesh=7, relax=False, method=method,
                  isotopes=False, boundary_mfp=None, temperatures=[300, 600], progress=False,
                  raise_errors=True)
    ph3 = direct_phono3py(atoms, 2, 7)
    ph3.run_thermal_conductivity(is_LBTE=method == "lbte", temperatures=[300, 600], is_isotope=False)
    tc = ph3.thermal_conductivity
    for t in range(2):
        np.testing.assert_allclose(voigt(r.kappa[t]), tc.kappa[0, t], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(r.mode_kappa, tc.mode_kappa[0], rtol=1e-6, atol=1e-9)
    assert r.kappa_particle is None and r.kappa_coherence is None and r.mode_kappa_particle is None
    # Umklapp-dominated κ falls with temperature (roughly as 1/T: 600 K between 0.4 and 0.6 × 300 K).
    assert 0.4 < r.kappa_average[1] / r.kappa_average[0] < 0.6
    np.testing.assert_allclose(r.kappa_at(600), r.kappa[1])


def test_rta_equals_wigner_particle_part(wigner11, rta11):
    # phono3py's Wigner populations term is the Peierls–Boltzmann RTA (to round-off, ~1e-16 κ).
    scale = float(rta11.kappa_average[0])
    np.testing.assert_allclose(rta11.kappa, wigner11.kappa_particle, rtol=1e-10, atol=1e-12 * scale)
    np.testing.assert_allclose(rta11.mode_kappa, wigner11.mode_kappa_particle, rtol=1e-9, atol=1e-12 * scale)


def test_relaxed_protocol_from_info_keys(wigner11):
    """Default protocol (relaxation, Wigner, isotopes), supercells and mesh from atoms.info: κ is
    phono3py's for the relaxed cell with those settings."""
    atoms = bulk("Cu", "fcc", a=3.65, cubic=True)  # 1.7% too large: the relaxation has work to do
    atoms.info.update(fc2_supercell=[2, 2, 2], fc3_supercell=np.diag([2, 2, 2]), q_point_mesh=[11, 11, 11])
    r = run_kappa(atoms, EMT_SPEC, progress=False, raise_errors=True)
    assert r.status == "ok" and not r.symmetry_broken and r.imaginary_modes is False
    assert r.spacegroup_initial == r.spacegroup_final == "Fm-3m (225)"
    assert r.relaxation["converged"] and r.relaxation["fmax_final_eV_per_A"] < 1e-4
    assert r.settings["fc3_supercell"] == np.diag([2, 2, 2]).tolist() and r.mesh == [11, 11, 11]
    # a sanity range: EMT Cu's equilibrium is 3.59 Å; the start, 3.65 Å, lies outside (unrelaxed fails)
    assert r.atoms.cell.lengths()[0] == pytest.approx(3.59, abs=0.01)
    # The exact check: phono3py run directly on the relaxed cell with the settings of atoms.info.
    tc = direct_default_protocol(direct_phono3py(r.atoms, 2, 11))
    np.testing.assert_allclose(voigt(r.kappa[0]), tc.kappa[0, 0], rtol=1e-6, atol=1e-9)
    # Physics, not a library's number: the relaxed lattice (3.59 Å) is stiffer than the unrelaxed 3.61 Å
    # one of wigner11 (same settings), so it conducts better (by about 9%).
    assert r.kappa_average[0] > 1.03 * wigner11.kappa_average[0]


# ----------------------------------------------------------------------------- supercell rules
def test_too_small_supercell_is_refused_with_a_better_one():
    prim = bulk("Cu", "fcc", a=A_CU)
    d_nn = nearest_neighbor_distance(prim)
    assert d_nn == pytest.approx(A_CU / np.sqrt(2), rel=1e-12)
    with pytest.raises(ValueError, match="too small") as info:
        run_kappa(prim, EMT_SPEC, fc2_supercell=2, fc3_supercell=2, mesh=7, progress=False)
    message = str(info.value)
    good = (2 * CONV_IN_PRIM).tolist()  # the conventional cell × 2: 32 atoms, 7.22 Å
    assert "fc3_supercell=[2, 2, 2] (8 atoms)" in message
    assert f"fc3_supercell={good} (32 atoms" in message
    np.testing.assert_array_equal(suggest_supercell(prim, MIN_WIDTH_NN_FACTOR * d_nn), good)
    widths = check_supercell(prim, good, 3)  # accepted
    np.testing.assert_allclose(widths, A_CU * 2, rtol=1e-12)
    with pytest.raises(ValueError, match="too small"):  # × 3 is 2.45 d_nn wide: just below the rule
        check_supercell(prim, 3, 3)
    # Why: bypassing the check, phono3py returns a meaningless κ (≈ 2e9 W/(m·K)) without warning.
    bad = run_kappa(prim, EMT_SPEC, fc2_supercell=2, fc3_supercell=2, mesh=7, relax=False,
                    check_supercells=False, progress=False, raise_errors=True)
    assert bad.kappa_average[0] > 1e3


def test_supercell_too_small_for_the_model_cutoff():
    from mlip.models import create_model

    def tiny(cutoff):
        return create_model("platonic", species=["Cu"], cutoff=cutoff, seed=0, channels=4, num_layers=1,
                            num_heads=1, head_dim=2)

    atoms = cu_conventional()
    from mlip.calculators.model_loading import resolve_calculator

    assert calculator_cutoff(resolve_calculator(tiny(4.0), dtype="float64")) == 4.0
    assert calculator_cutoff(EMT()) is None  # foreign calculators: no cutoff rule
    # A 4 Å cutoff is narrower than the 7.22 Å supercell: accepted.
    check_supercell(atoms, 2, 3, cutoff=4.0)
    check_supercell(atoms, 2, 2, cutoff=4.0)
    # An 8 Å cutoff is not; the refusal comes before any force call and names [3, 3, 3] (10.8 Å).
    refused = r"fc3_supercell=\[2, 2, 2\].*cutoff 8 Å.*fc3_supercell=\[3, 3, 3\]"
    with pytest.raises(ValueError, match=refused):
        run_kappa(atoms, tiny(8.0), fc2_supercell=3, fc3_supercell=2, mesh=7, progress=False)
    with pytest.raises(ValueError, match=r"fc2_supercell=\[2, 2, 2\].*cutoff 8 Å"):
        run_kappa(atoms, tiny(8.0), fc2_supercell=2, fc3_supercell=3, mesh=7, progress=False)


def test_reduced_widths_do_not_depend_on_the_basis():
    prim = bulk("Cu", "fcc", a=A_CU)
    skewed = np.array([[1, 0, 0], [5, 1, 0], [0, 0, 1]]) @ (2 * CONV_IN_PRIM)  # same lattice, skewed basis
    cell = skewed @ prim.cell.array
    np.testing.assert_allclose(reduced_widths(cell), 2 * A_CU, rtol=1e-12)
    from mlip.workflows.phonons.phonopy_bridge import perpendicular_widths

    assert perpendicular_widths(cell).min() < A_CU  # the naive measure would refuse it


# ----------------------------------------------------------------------------- resume
def test_killed_run_resumes_without_recomputing(tmp_path):
    atoms = cu_conventional()
    kwargs = dict(fc2_supercell=2, fc3_supercell=2, mesh=7, progress=False)
    n_disp_fc2, n_disp_fc3 = displacement_counts(atoms, 2)  # phono3py's: 1 and 37
    killed = CountingEMT(fail_at_supercell=20)
    first = run_kappa(atoms, killed, out_dir=tmp_path, **kwargs)
    # The displaced supercells of fc2, then those of fc3, and the undisplaced supercell after each set
    # (its forces are subtracted); the 21st supercell call "died".
    assert first.status == "failed" and first.failed_stage == "fc3" and "simulated kill" in first.error
    assert killed.supercell_calls == 20 and killed.unit_calls > 0  # the relaxation ran
    assert json.loads((tmp_path / "kappa.json").read_text())["status"] == "failed"
    cache = tmp_path / "cache"
    n_fc2, n_fc3, n_perfect = (len(list((cache / name).glob("forces_*.npy")))
                               for name in ("fc2", "fc3", "fc2-perfect"))
    # fc2's displacements, its undisplaced supercell, then as many of fc3's as the 20 calls left
    assert (n_fc2, n_perfect, n_fc3) == (n_disp_fc2, 1, 20 - n_disp_fc2 - 1)

    rerun = CountingEMT()
    second = run_kappa(atoms, rerun, out_dir=tmp_path, **kwargs)
    assert second.status == "ok"
    assert rerun.unit_calls == 0  # the relaxed structure was reused
    # only the unfinished supercells: fc3's undisplaced supercell is fc2's (the same matrix), read back
    assert rerun.supercell_calls == n_disp_fc3 - n_fc3
    assert not (cache / "fc3-perfect").exists()
    assert (second.n_displacements_fc2, second.n_displacements_fc3) == (n_disp_fc2, n_disp_fc3)
    # EMT is exactly invariant: the undisplaced supercells carry no forces
    assert second.residual_force_max_fc2 < 1e-10 and second.residual_force_max_fc3 < 1e-10

    uninterrupted = run_kappa(atoms, EMT(), **kwargs)
    np.testing.assert_allclose(second.kappa, uninterrupted.kappa, rtol=1e-12)
    np.testing.assert_allclose(second.mode_kappa, uninterrupted.mode_kappa, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(second.atoms.cell.array, uninterrupted.atoms.cell.array, rtol=0, atol=0)

    # A finished run reruns from the cache with other conductivity settings, no force call.
    third_calc = CountingEMT()
    third = run_kappa(atoms, third_calc, out_dir=tmp_path, method="rta", **kwargs)
    assert third_calc.supercell_calls == third_calc.unit_calls == 0
    np.testing.assert_allclose(third.kappa, second.kappa_particle, rtol=1e-10,
                               atol=1e-12 * second.kappa_average[0])

    # Another model must not reuse these forces.
    with pytest.raises(ValueError, match="another model"):
        run_kappa(atoms, EMT(), out_dir=tmp_path, **kwargs)


def test_residual_forces_are_subtracted_from_fc2_and_fc3(offset_emt):
    """Forces on the undisplaced supercells are subtracted (phonopy's --fz): EMT with a fixed force
    added on every atom gives EMT's fc2 and fc3, and the largest added force is reported for both sets.
    (The force constants are the exact check: on a 5³ mesh phono3py's linewidths, and κ by about 2 %,
    move with force noise of 1e-12 eV/Å.)"""
    kwargs = dict(fc2_supercell=2, fc3_supercell=2, mesh=5, relax=False, progress=False, raise_errors=True)
    exact = run_kappa(cu_conventional(), EMT(), **kwargs)
    offset = run_kappa(cu_conventional(), offset_emt(), **kwargs)
    added = np.linalg.norm(offset_emt.offset(32), axis=1).max()
    assert offset.residual_force_max_fc2 == pytest.approx(added, rel=1e-12)
    assert offset.residual_force_max_fc3 == pytest.approx(added, rel=1e-12)
    assert exact.residual_force_max_fc2 < 1e-10 and exact.residual_force_max_fc3 < 1e-10
    np.testing.assert_allclose(offset.phono3py.fc2, exact.phono3py.fc2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(offset.phono3py.fc3, exact.phono3py.fc3, rtol=0, atol=1e-10)
    kept = run_kappa(cu_conventional(), offset_emt(), subtract_residual_forces=False, **kwargs)
    assert np.abs(kept.phono3py.fc2 - exact.phono3py.fc2).max() > 0.1  # eV/Å²
    assert kept.residual_force_max_fc2 is None and kept.residual_force_max_fc3 is None
    assert offset.settings["subtract_residual_forces"] is True


# ----------------------------------------------------------------------------- imaginary modes
def test_dynamically_unstable_structure_stops_before_fc3(wigner11):
    """bcc Cu is dynamically unstable with EMT (as with DFT): imaginary modes, no fc3."""
    import phonopy
    from phonopy.structure.atoms import PhonopyAtoms

    calc = CountingEMT()
    r = run_kappa(bulk("Cu", "bcc", a=2.87, cubic=True), calc, fc2_supercell=3, fc3_supercell=3, mesh=5,
                  progress=False, raise_errors=True)
    assert r.status == "imaginary_modes" and r.imaginary_modes and not r.failed
    assert r.kappa is None and r.mode_kappa is None and r.n_displacements_fc3 == 0
    assert calc.supercell_calls == r.n_displacements_fc2 + 1  # fc2 and its undisplaced supercell only
    assert r.lowest_frequency < -0.5  # THz: far beyond numerical noise

    # Independent check with phonopy on the same relaxed cell: the same lowest frequency on the mesh.
    u = r.atoms
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ph = phonopy.Phonopy(PhonopyAtoms(symbols=u.get_chemical_symbols(), cell=u.cell.array,
                                          scaled_positions=u.get_scaled_positions()),
                             supercell_matrix=np.eye(3) * 3, primitive_matrix="auto")
    ph.generate_displacements(distance=0.03)
    assert r.n_displacements_fc2 == len(ph.supercells_with_displacements)
    forces = []
    for s in ph.supercells_with_displacements:
        a = Atoms(s.symbols, cell=s.cell, scaled_positions=s.scaled_positions, pbc=True)
        a.calc = EMT()
        forces.append(a.get_forces())
    ph.forces = np.array(forces)
    ph.produce_force_constants()
    ph.symmetrize_force_constants()
    ph.run_mesh([5, 5, 5], is_gamma_center=True)
    assert r.lowest_frequency == pytest.approx(float(ph.mesh.frequencies.min()), abs=1e-6)

    # An unstable material scores the worst κ_SRME/SRE against any reference.
    scores = kappa_scores(r, wigner11)
    assert scores["srme"] == 2 and scores["sre"] == 2 and scores["srd"] == -2
    assert scores["status"] == "imaginary_modes"


def test_has_imaginary_modes_rule():
    f = np.array([[0.0, 0.0, 0.0, 5.0], [1.0, 1.0, 2.0, 5.0]])
    assert not has_imaginary_modes(f)
    g = f.copy()
    g[0, :3] = -0.005  # Γ acoustic noise within 0.01 THz
    assert not has_imaginary_modes(g)
    g[0, 0] = -0.02
    assert has_imaginary_modes(g)
    h = f.copy()
    h[1, 0] = -1e-4  # away from Γ nothing negative is allowed
    assert has_imaginary_modes(h)
    h = f.copy()
    h[0, 3] = -1e-4  # optical at Γ
    assert has_imaginary_modes(h)
    assert has_imaginary_modes(np.full((2, 4), np.nan))


def test_broken_symmetry_stops_before_fc3_and_scores_two(monkeypatch, wigner11):
    """A relaxation that changes the space group (simulated) stops before fc3, as in the protocol."""
    import mlip.workflows.phonons.kappa as kappa_module

    original = kappa_module.cached_relaxation

    def broken(*args, **kwargs):
        relaxation = original(*args, **kwargs)
        return relaxation._replace(info={**relaxation.info, "spacegroup_final": "P1 (1)"})

    monkeypatch.setattr(kappa_module, "cached_relaxation", broken)
    calc = CountingEMT()
    kwargs = dict(fc2_supercell=2, fc3_supercell=2, mesh=5, progress=False, raise_errors=True)
    r = run_kappa(cu_conventional(), calc, **kwargs)
    assert r.status == "symmetry_broken" and r.symmetry_broken and r.imaginary_modes is False
    n_disp_fc2, _ = displacement_counts(cu_conventional(), 2)
    assert r.kappa is None and r.n_displacements_fc3 == 0
    assert calc.supercell_calls == n_disp_fc2 + 1  # fc2's displaced supercells and the undisplaced one
    assert (r.spacegroup_initial, r.spacegroup_final) == ("Fm-3m (225)", "P1 (1)")
    # On request κ is computed anyway, but the material still scores 2.
    r = run_kappa(cu_conventional(), EMT(), stop_on_broken_symmetry=False, **kwargs)
    assert r.status == "symmetry_broken" and r.kappa is not None and not r.ok
    assert kappa_scores(r, wigner11)["srme"] == 2.0


# ----------------------------------------------------------------------------- JSON
def test_json_round_trip(wigner11, tmp_path):
    path = wigner11.save(tmp_path)
    assert path == tmp_path / "kappa.json"
    data = json.loads(path.read_text())
    for key in ("format", "model", "status", "failed", "error", "imaginary_modes", "symmetry_broken",
                "spacegroup_initial", "spacegroup_final", "settings", "structure", "relaxation", "supercells",
                "lowest_frequency_THz", "conductivity", "timings_s", "versions"):
        assert key in data, key
    assert data["status"] == "ok" and data["model"] == EMT_SPEC and data["error"] is None
    assert data["supercells"]["fc3"]["n_atoms"] == 32
    assert data["supercells"]["fc3"]["n_displacements"] == displacement_counts(cu_conventional(), 2)[1]
    cond = data["conductivity"]
    assert cond["method"] == "wigner" and cond["temperatures_K"] == [300.0] and cond["mesh"] == [11, 11, 11]
    assert cond["tensor_layout"] == "3x3"
    assert cond["modes"]["voigt_order"] == ["xx", "yy", "zz", "yz", "xz", "xy"]
    # JSON floats round-trip exactly.
    np.testing.assert_array_equal(cond["kappa_W_per_mK"], wigner11.kappa)
    np.testing.assert_array_equal(cond["kappa_average_W_per_mK"], wigner11.kappa_average)
    np.testing.assert_array_equal(cond["kappa_coherence_W_per_mK"], wigner11.kappa_coherence)
    np.testing.assert_array_equal(cond["modes"]["mode_kappa_W_per_mK"], wigner11.mode_kappa)
    np.testing.assert_array_equal(cond["modes"]["grid_weights"], wigner11.grid_weights)
    np.testing.assert_array_equal(cond["modes"]["frequencies_THz"], wigner11.frequencies)
    np.testing.assert_array_equal(cond["modes"]["heat_capacities_eV_per_K"], wigner11.heat_capacities)

    loaded = load_kappa(tmp_path)
    assert isinstance(loaded, KappaResult) and loaded.status == "ok" and loaded.phono3py is None
    for name in ("kappa", "kappa_particle", "mode_kappa", "mode_kappa_particle", "gamma", "qpoints",
                 "fc3_supercell", "fc3_widths", "temperatures"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(wigner11, name), err_msg=name)
    np.testing.assert_array_equal(loaded.atoms.positions, wigner11.atoms.positions)
    residuals = (wigner11.residual_force_max_fc2, wigner11.residual_force_max_fc3)
    assert None not in residuals
    assert (loaded.residual_force_max_fc2, loaded.residual_force_max_fc3) == residuals
    assert kappa_srme(data, wigner11) == 0.0  # the JSON dict is a valid metric record

    gz = wigner11.save(tmp_path / "gz", compress=True)
    assert gz.name == "kappa.json.gz"
    assert json.loads(gzip.decompress(gz.read_bytes())) == data
    np.testing.assert_array_equal(load_kappa(gz).mode_kappa, wigner11.mode_kappa)


def test_invalid_arguments():
    atoms = cu_conventional()
    with pytest.raises(ValueError, match="method"):
        run_kappa(atoms, EMT_SPEC, fc3_supercell=2, method="bte", progress=False)
    with pytest.raises(ValueError, match="periodic"):
        slab = atoms.copy()
        slab.pbc = [True, True, False]
        run_kappa(slab, EMT_SPEC, fc3_supercell=2, progress=False)
    with pytest.raises(ValueError, match="temperatures"):
        run_kappa(atoms, EMT_SPEC, fc3_supercell=2, temperatures=[], progress=False)
    with pytest.raises(ValueError, match="mesh"):
        run_kappa(atoms, EMT_SPEC, fc3_supercell=2, mesh=[11, 11], progress=False)
    with pytest.raises(ValueError, match="left-handed"):
        run_kappa(atoms, EMT_SPEC, fc3_supercell=[[2, 0, 0], [0, 2, 0], [0, 0, -2]], progress=False)


# ----------------------------------------------------------------------------- metrics
def direct_srme(k_pred, k_ref, w, kappa_pred, kappa_ref):
    """The published formula with per-q-point values k_i (trace/3) and weights w_i."""
    return 2 * np.sum(w[:, None] * np.abs(k_pred - k_ref)) / (np.sum(w) * (kappa_pred + kappa_ref))


def random_material(rng, n_q=7, n_band=6):
    w = rng.integers(1, 9, size=n_q).astype(float)
    per_q = rng.random((n_q, n_band, 6))  # per-q-point values (Voigt)
    modes = w[:, None, None] * per_q  # phono3py convention: multiplicity included
    kappa_voigt = modes.sum(axis=(0, 1)) / w.sum()
    return w, per_q, modes, kappa_voigt


def test_srme_agrees_with_the_direct_formula():
    rng = np.random.default_rng(0)
    w, per_q_p, modes_p, kv_p = random_material(rng)
    _, per_q_r, _, _ = random_material(rng)
    modes_r = w[:, None, None] * per_q_r
    kv_r = modes_r.sum(axis=(0, 1)) / w.sum()
    kp, kr = kv_p[:3].mean(), kv_r[:3].mean()
    expected = direct_srme(per_q_p[..., :3].mean(-1), per_q_r[..., :3].mean(-1), w, kp, kr)
    assert kappa_srme_arrays(modes_p, modes_r, w, kp, kr) == pytest.approx(expected, rel=1e-12)
    assert kappa_srme_arrays(modes_p[..., :3].mean(-1), modes_r[..., :3].mean(-1), w, kv_p, kv_r) == \
        pytest.approx(expected, rel=1e-12)  # trace/3 modes and Voigt totals are accepted too
    assert 0 < expected < 2
    # Records: flat mappings with temperatures.
    pred = {"kappa": kv_p[None], "mode_kappa": modes_p[None], "grid_weights": w, "temperatures": [300.0]}
    ref = {"kappa": kv_r[None], "mode_kappa": modes_r[None], "grid_weights": w, "temperatures": [300.0]}
    scores = kappa_scores(pred, ref)
    assert scores["srme"] == pytest.approx(expected, rel=1e-12)
    assert scores["sre"] == pytest.approx(2 * abs(kp - kr) / (kp + kr), rel=1e-12)
    assert scores["srd"] == pytest.approx(2 * (kp - kr) / (kp + kr), rel=1e-12)
    assert scores["kappa_pred"] == pytest.approx(kp) and scores["kappa_ref"] == pytest.approx(kr)


def test_metric_special_values():
    rng = np.random.default_rng(1)
    w, _, modes, kv = random_material(rng)
    k = kv[:3].mean()
    # Identical inputs → 0.
    assert kappa_srme_arrays(modes, modes, w, k, k) == 0.0
    assert kappa_sre(k, k) == 0.0 and kappa_srd(k, k) == 0.0
    # One side zero (modes ≥ 0) → 2.
    assert kappa_srme_arrays(np.zeros_like(modes), modes, w, 0.0, k) == pytest.approx(2.0, rel=1e-12)
    assert kappa_srme_arrays(modes, np.zeros_like(modes), w, k, 0.0) == pytest.approx(2.0, rel=1e-12)
    assert kappa_sre(0.0, k) == 2.0 and kappa_srd(0.0, k) == -2.0 and kappa_srd(k, 0.0) == 2.0
    # Both zero → 0; a missing prediction → the worst.
    assert kappa_srme_arrays(np.zeros_like(modes), np.zeros_like(modes), w, 0.0, 0.0) == 0.0
    assert kappa_sre(None, k) == 2.0 and kappa_srd(float("nan"), k) == -2.0
    bad = modes.copy()
    bad[0, 0, 0] = np.nan
    assert kappa_srme_arrays(bad, modes, w, k, k) == 2.0
    # SRE/SRD of tensors use trace/3.
    assert kappa_srd(np.eye(3) * 3.0, np.diag([1.0, 1.0, 1.0])) == pytest.approx(1.0)
    assert kappa_average(np.diag([1.0, 2.0, 6.0])) == pytest.approx(3.0)
    assert kappa_average([1.0, 2.0, 6.0, 9.0, 9.0, 9.0]) == pytest.approx(3.0)
    # Different grids cannot be compared mode by mode.
    with pytest.raises(ValueError, match="same grid"):
        kappa_srme_arrays(modes[:-1], modes, w, k, k)
    with pytest.raises(ValueError, match="reference"):
        kappa_srd(k, float("nan"))


def test_flagged_materials_score_two_and_the_mean():
    rng = np.random.default_rng(2)
    w, _, modes, kv = random_material(rng)
    good = {"kappa": kv, "mode_kappa": modes, "grid_weights": w}
    refs = {f"m{i}": good for i in range(5)}
    preds = {
        "m0": good,  # perfect
        "m1": dict(good, failed=True),
        "m2": dict(good, imaginary_modes=True),
        "m3": dict(good, symmetry_broken=True),
        # m4 missing
        "extra": good,
    }
    for key in ("m1", "m2", "m3"):
        s = kappa_scores(preds[key], refs[key])
        assert (s["srme"], s["sre"], s["srd"]) == (2.0, 2.0, -2.0), key
    mean = mean_kappa_scores(preds, refs)
    assert mean["srme"] == pytest.approx(np.mean([0, 2, 2, 2, 2]))
    assert mean["sre"] == pytest.approx(1.6) and mean["srd"] == pytest.approx(-1.6)
    assert (mean["n_materials"], mean["n_ok"], mean["n_failed"], mean["n_missing"], mean["n_extra"]) == \
        (5, 1, 4, 1, 1)
    assert mean["per_material"]["m4"]["status"] == "missing"
    # Sequences in the same order work too; lengths must match.
    assert mean_kappa_scores([good, None], [good, good])["srme"] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        mean_kappa_scores([good], [good, good])
    with pytest.raises(ValueError, match="reference"):
        kappa_scores(good, dict(good, failed=True))
    with pytest.raises(ValueError, match="no mode-resolved"):
        kappa_scores({"kappa": kv, "grid_weights": w}, good)
    nan = kappa_scores(dict(good, kappa=kv * np.nan), good)  # no finite κ: failed, worst scores
    assert (nan["status"], nan["srme"], nan["sre"], nan["srd"]) == ("failed", 2.0, 2.0, -2.0)


def test_mode_kappa_total_matches_the_published_loop():
    rng = np.random.default_rng(3)
    n_t, n_q, n_b = 2, 3, 4
    particle = rng.random((n_t, n_q, n_b, 6))
    coherence = rng.random((n_t, n_q, n_b, n_b, 6))
    coherence = coherence + coherence.transpose(0, 1, 3, 2, 4)  # phono3py's is symmetric in the bands
    coherence[:, :, np.arange(n_b), np.arange(n_b)] = 0.0
    heat = rng.random((n_t, n_q, n_b))
    heat[0, 0, :2] = 0.0  # vanishing heat capacities (acoustic modes at Γ): no NaN
    total = mode_kappa_total(particle, coherence, heat)
    # The published expression, evaluated as written: 2 Σ_s κ_C[s, m] C_s / (C_s + C_m) with NumPy's
    # 0/0 = NaN, then NaN entries set to 0 (Matbench Discovery's calc_mode_kappa_tot).
    with np.errstate(divide="ignore", invalid="ignore"):
        published = 2 * (coherence * heat[:, :, :, None, None]
                         / (heat[:, :, :, None, None] + heat[:, :, None, :, None])).sum(axis=2)
    published[np.isnan(published)] = 0
    np.testing.assert_allclose(total, particle + published, rtol=1e-12)
    assert np.all(total[0, 0, :2] == particle[0, 0, :2])  # modes without heat capacity: no coherence share
    # Pairs of modes that both have heat capacity keep their whole coherence contribution; a pair with
    # a zero-heat-capacity mode contributes nothing (its weight 2C/(C+0) goes to the mode that is zeroed).
    active = heat > 0
    pair = active[..., :, None] & active[..., None, :]
    kept = np.where(pair[..., None], coherence, 0.0).sum(axis=(2, 3))
    np.testing.assert_allclose(total.sum(axis=2), particle.sum(axis=2) + kept, rtol=1e-12)


def test_srme_of_real_results(wigner11, rta11):
    """κ_SRME of the RTA result against the Wigner one: only the coherence term differs."""
    rta = rta11
    assert kappa_srme(wigner11, wigner11) == 0.0
    srme = kappa_srme(rta, wigner11)
    w = wigner11.grid_weights
    k_rta, k_w = rta.kappa_average[0], wigner11.kappa_average[0]
    diff = np.abs(rta.mode_kappa[0, ..., :3].mean(-1) - wigner11.mode_kappa[0, ..., :3].mean(-1)).sum()
    assert srme == pytest.approx(2 * diff / w.sum() / (k_rta + k_w), rel=1e-12)
    # Modes only gain coherence shares here, so the mode error equals the total error (SRE).
    assert srme == pytest.approx(kappa_scores(rta, wigner11)["sre"], rel=1e-6)
    with pytest.raises(ValueError, match="no result at 600 K"):
        kappa_srme(rta, wigner11, temperature=600)
    # Modes are only compared on the same q-points.
    shifted = dict(rta.to_dict())
    shifted["conductivity"] = dict(shifted["conductivity"], modes=dict(
        shifted["conductivity"]["modes"], qpoints=(rta.qpoints[::-1]).tolist()))
    with pytest.raises(ValueError, match="q-points differ"):
        kappa_srme(shifted, wigner11)
    translated = {"kappa": rta.kappa, "mode_kappa": rta.mode_kappa, "grid_weights": rta.grid_weights,
                  "temperatures": rta.temperatures, "qpoints": rta.qpoints + [1, 0, -2]}
    assert kappa_srme(translated, wigner11) == srme  # equal modulo reciprocal lattice vectors
