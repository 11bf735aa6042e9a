"""The physics suite: what every :class:`mlip.Potential` must satisfy, whatever its weights.

Each check is a plain function taking a float64 potential (and, where it matters, a structure; without
one it runs over the suite's structures for it, :mod:`mlip.testing.structures`) and raising
``AssertionError`` with a message naming the quantity and the deviation. The checks evaluate on the CPU
in float64, through :class:`mlip.MLIPCalculator` (as a user does) or the potential itself (batches).
The structures use Cu, Au, H, C and O, so the potential must be built for those elements
(:data:`mlip.testing.SPECIES`).

- derivatives: :func:`check_forces_finite_difference`, :func:`check_stress_finite_difference`,
  :func:`check_stress_tensor`, :func:`check_axis_aligned_bonds`, :func:`check_force_training_gradients`
- symmetries: :func:`check_invariance` (:func:`check_translation_invariance`,
  :func:`check_permutation_invariance`, :func:`check_rotation_invariance`, :func:`check_image_invariance`)
- locality: :func:`check_small_cell_images`, :func:`check_extensivity`, :func:`check_cutoff_smoothness`
  (:func:`check_cutoff_continuity`, :func:`check_smooth_scan`)
- outputs: :func:`validate_outputs`, :func:`check_batch_consistency`, :func:`check_float32_matches_float64`
- dynamics and files: :func:`check_nve`, :func:`check_save_load`, :func:`check_short_range_repulsion`

Tolerances (relative, float64): symmetries hold to ``SYMMETRY_TOL`` (a few hundred ulps of rounding),
derivatives match central finite differences to ``DERIVATIVE_RTOL``.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from ase import Atoms

from mlip.testing.structures import (STRUCTURES, axis_aligned_cubic_cell, cluster_with_probe, dimer,
                                     dimer_distances, far_molecule, triclinic_crystal)

#: relative tolerance of a symmetry in float64: a few hundred ulps of accumulated rounding
SYMMETRY_TOL = 1e-10
#: Central differences with h = 1e-5 Å (or strain 1e-5) have truncation error h²·|E'''|/6 ≲ 1e-9 (for
#: |E'''| ≲ 100 eV/Å³, the steep untrained models included) and rounding error ~1e-16·|E|/h ≲ 1e-9
#: for |E| ≲ 100 eV: the 1e-6 relative tolerance sits well above both.
DERIVATIVE_RTOL = 1e-6

#: the structures each check runs over by default (names in ``STRUCTURES``)
FORCE_STRUCTURES = ("molecule", "slab", "small_fcc", "small_pair", "triclinic")
STRESS_STRUCTURES = ("triclinic", "small_fcc", "small_pair", "slab")
INVARIANCE_STRUCTURES = ("molecule", "slab", "small_fcc", "small_pair", "triclinic")
IMAGE_STRUCTURES = ("triclinic", "small_fcc", "slab")
SUPERCELL_STRUCTURES = ("triclinic", "small_fcc")
#: the dimers of :func:`check_short_range_repulsion` when the potential has all their elements
DIMER_PAIRS = (("Cu", "Cu"), ("Cu", "Au"), ("H", "H"), ("C", "O"), ("Au", "H"))


# ------------------------------------------------------------------------------------------ helpers
def calc64(potential):
    """An :class:`mlip.MLIPCalculator` of ``potential`` on the CPU in float64."""
    from mlip.calculators import MLIPCalculator

    return MLIPCalculator(potential, device="cpu", dtype="float64")


def evaluate(potential, atoms: Atoms) -> Dict[str, np.ndarray]:
    """Energy, forces [n, 3] and (with a 3-D cell) the stress tensor [3, 3] of a copy of ``atoms``."""
    atoms = atoms.copy()
    atoms.calc = calc64(potential)
    out = {"energy": atoms.get_potential_energy(), "forces": atoms.get_forces()}
    if atoms.cell.rank == 3:
        out["stress"] = atoms.get_stress(voigt=False)
    return out


def evaluate_batch(potential, structures: Sequence[Atoms]):
    """Energies [n], forces (list of [n_i, 3]) and stresses [n, 3, 3] of many structures in one batch."""
    from mlip.graph import batch_atoms

    graph = batch_atoms(structures, potential.cutoff, dtype=torch.float64)
    out = potential(graph)
    counts = [len(a) for a in structures]
    forces = torch.split(out["forces"].detach(), counts)
    voigt = out["stress"].detach().numpy()
    stress = voigt[:, [[0, 5, 4], [5, 1, 3], [4, 3, 2]]]
    return out["energy"].detach().numpy(), [f.numpy() for f in forces], stress


def rotated(atoms: Atoms, R: np.ndarray) -> Atoms:
    """A copy of ``atoms`` with positions and cell rotated by the matrix ``R`` [3, 3]."""
    rot = atoms.copy()
    rot.positions = atoms.positions @ R.T
    rot.set_cell(atoms.cell.array @ R.T, scale_atoms=False)
    return rot


def assert_close(a, b, scale, tol=SYMMETRY_TOL, what=""):
    """max |a − b| ≤ tol · max(scale, 1e-2), else AssertionError naming ``what`` and the error."""
    err = np.abs(np.asarray(a) - np.asarray(b)).max()
    # Scale floor 1e-2 (eV, eV/Å, eV/Å³): a quantity that is zero by symmetry (a force in a perfect
    # crystal) is a cancelling sum of hundreds of edge terms of that size or larger, so it is compared
    # absolutely, to 1e-12.
    assert err <= tol * max(scale, 1e-2), f"{what}: error {err:.3e} vs scale {scale:.3e}"


def assert_approx(a, b, rel, abs, what=""):
    """|a − b| ≤ max(rel · |b|, abs) (``pytest.approx``'s rule), else AssertionError naming ``what``."""
    err = float(np.abs(a - b))
    assert err <= max(rel * float(np.abs(b)), abs), f"{what}: {a!r} vs {b!r} (difference {err:.3e})"


def _over(default: Iterable[str], atoms: Optional[Atoms], check: Callable[[Atoms], None]) -> None:
    """``check(atoms)``, or ``check`` on each default structure with its name in the message."""
    if atoms is not None:
        check(atoms)
        return
    for name in default:
        try:
            check(STRUCTURES[name]())
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None


def declared_rotations(potential) -> Optional[np.ndarray]:
    """The rotations [k, 3, 3] under which the model declares itself exactly invariant
    (``model.invariant_rotations``, e.g. a Platonic group), or None (invariant under every rotation)."""
    rotations = getattr(potential.model, "invariant_rotations", None)
    return None if rotations is None else rotations.double().numpy()


def richardson(fd: Callable[[float], np.ndarray], h: float) -> np.ndarray:
    """Central differences with the h² error term cancelled: (4·D(h/2) − D(h)) / 3, error O(h⁴).

    In a perfect cubic crystal the l > 0 features vanish by symmetry, where a per-degree norm
    x / √(⟨x²⟩ + ε) is steep (third derivative ~ ε^(-3/2)); plain central differences then carry an
    h² truncation error of ~1e-4 relative, which this removes.
    """
    return (4 * fd(h / 2) - fd(h)) / 3


# -------------------------------------------------------------------------------------- derivatives
def check_forces_finite_difference(potential, atoms: Optional[Atoms] = None) -> None:
    """Forces are −∂E/∂r (central differences, h = 1e-5 Å) to ``DERIVATIVE_RTOL`` of the largest force,
    and sum to zero (Newton's third law of a translation-invariant energy). A one-atom periodic cell
    has zero force (translation invariance with a single atom)."""
    from ase.calculators.fd import calculate_numerical_forces

    def check(atoms):
        atoms.calc = calc64(potential)
        forces = atoms.get_forces()
        if len(atoms) == 1:
            assert np.abs(forces).max() < 1e-12, f"force on the only atom {np.abs(forces).max():.3e} eV/Å"
            return
        assert np.abs(forces).max() > 1e-3, "forces too small for a meaningful comparison"
        numeric = calculate_numerical_forces(atoms, eps=1e-5)
        err = np.abs(forces - numeric).max()
        assert err <= DERIVATIVE_RTOL * np.abs(forces).max(), f"max |F - F_fd| = {err:.3e}"
        total = np.abs(forces.sum(axis=0)).max()
        assert total < 1e-10 * max(1.0, np.abs(forces).max()) * len(atoms), f"|Σ F| = {total:.3e} eV/Å"

    _over(FORCE_STRUCTURES, atoms, check)


def check_stress_finite_difference(potential, atoms: Optional[Atoms] = None) -> None:
    """The stress (Voigt [6]) is (1/V) ∂E/∂ε (central differences, strain 1e-5) to ``DERIVATIVE_RTOL``
    of its largest component."""
    from ase.calculators.fd import calculate_numerical_stress

    def check(atoms):
        atoms.calc = calc64(potential)
        stress = atoms.get_stress()
        assert stress.shape == (6,), f"stress shape {stress.shape}, not (6,)"
        assert np.abs(stress).max() > 1e-5, "stress too small for a meaningful comparison"
        numeric = calculate_numerical_stress(atoms, eps=1e-5, voigt=True)
        err = np.abs(stress - numeric).max()
        assert err <= DERIVATIVE_RTOL * np.abs(stress).max(), f"max |σ - σ_fd| = {err:.3e}"

    _over(STRESS_STRUCTURES, atoms, check)


def check_stress_tensor(potential, atoms: Optional[Atoms] = None) -> None:
    """σ = (1/V) ∂E/∂ε is a symmetric tensor, checked off-diagonal with ASE's Voigt order against a
    symmetric shear of positions and cell (default structure: the triclinic crystal)."""
    atoms = triclinic_crystal() if atoms is None else atoms
    atoms.calc = calc64(potential)
    s = atoms.get_stress(voigt=False)
    assert np.allclose(s, s.T, atol=1e-14), f"stress not symmetric: max |σ - σᵀ| {np.abs(s - s.T).max():.3e}"
    e0_cell = atoms.cell.array.copy()
    pos0 = atoms.get_positions()
    h = 1e-5
    for a, b in [(1, 2), (0, 2), (0, 1)]:
        vals = []
        for sign in (1, -1):
            eps = np.zeros((3, 3))
            eps[a, b] = eps[b, a] = sign * h / 2  # symmetric shear with ε_ab + ε_ba = ±h
            deform = np.eye(3) + eps
            atoms.set_cell(e0_cell @ deform, scale_atoms=False)
            atoms.set_positions(pos0 @ deform)
            vals.append(atoms.get_potential_energy())
        atoms.set_cell(e0_cell, scale_atoms=False)
        atoms.set_positions(pos0)
        numeric = (vals[0] - vals[1]) / (2 * h) / atoms.get_volume()
        assert_approx(s[a, b], numeric, rel=1e-6, abs=1e-12, what=f"σ[{a},{b}] against the shear derivative")


def check_axis_aligned_bonds(potential) -> None:
    """Forces and stress of a simple-cubic cell whose bonds all lie along ±x, ±y, ±z (Euler-angle poles)
    match finite differences (Richardson-extrapolated), before and after one atom is moved in the xy plane.

    A model that detaches the rotation of such bonds (as eSEN/EquiformerV3's reference code does for
    bonds along y) loses their transverse force and shear-stress terms; the species are mixed so
    that these do not all cancel by symmetry.
    """
    from ase.calculators.fd import calculate_numerical_forces, calculate_numerical_stress

    atoms = axis_aligned_cubic_cell()
    atoms.calc = calc64(potential)
    stress = atoms.get_stress()
    numeric = richardson(lambda h: calculate_numerical_stress(atoms, eps=h, voigt=True), 2e-5)
    scale = np.abs(stress).max()
    assert scale > 1e-5, "stress too small for a meaningful comparison"
    err = np.abs(stress - numeric).max()
    assert err <= DERIVATIVE_RTOL * scale, f"axis-aligned bonds: max |σ - σ_fd| = {err:.3e}"
    # Move one atom in the xy plane: its own bonds tilt, all other bonds stay axis aligned.
    atoms.positions[0, :2] += [0.15, 0.1]
    forces = atoms.get_forces()
    numeric = richardson(lambda h: calculate_numerical_forces(atoms, eps=h), 2e-5)
    assert np.abs(forces).max() > 1e-3, "forces too small for a meaningful comparison"
    err = np.abs(forces - numeric).max()
    assert err <= DERIVATIVE_RTOL * np.abs(forces).max(), f"one bond tilted: max |F - F_fd| = {err:.3e}"
    stress = atoms.get_stress()
    # A real xy shear stress now, large enough that the comparison below resolves it to 1 %.
    assert abs(stress[5]) > 100 * DERIVATIVE_RTOL * np.abs(stress).max(), f"σ_xy = {stress[5]:.3e} too small"
    numeric = richardson(lambda h: calculate_numerical_stress(atoms, eps=h, voigt=True), 2e-5)
    err = np.abs(stress - numeric).max()
    assert err <= DERIVATIVE_RTOL * np.abs(stress).max(), f"one bond tilted: max |σ - σ_fd| = {err:.3e}"


def check_force_training_gradients(potential, atoms: Optional[Atoms] = None) -> None:
    """With ``create_graph=True`` a loss on forces and stress has a non-zero gradient in the weights
    (forces and stress can be trained)."""
    from mlip.graph import AtomicGraph

    atoms = triclinic_crystal() if atoms is None else atoms
    graph = AtomicGraph.from_atoms(atoms, potential.cutoff)
    out = potential(graph, create_graph=True)
    loss = (out["forces"] ** 2).sum() + (out["stress"] ** 2).sum()
    params = [p for p in potential.parameters() if p.requires_grad]
    assert params, "the potential has no trainable parameters"
    assert loss.requires_grad, "the force and stress loss does not depend on the weights"
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    total = sum(float(g.abs().sum()) for g in grads if g is not None)
    assert total > 0, "the gradient of a force and stress loss in the weights is zero"


# --------------------------------------------------------------------------------------- symmetries
def check_translation_invariance(potential, atoms: Optional[Atoms] = None) -> None:
    """Energy and forces are unchanged when every atom moves by the same vector: through the calculator
    (which recentres each structure) and through the potential itself on a batch (which does not)."""

    def check(atoms):
        ref = evaluate(potential, atoms)
        moved = atoms.copy()
        moved.positions += np.array([12.3, -7.7, 4.4])
        out = evaluate(potential, moved)
        assert_close(out["energy"], ref["energy"], abs(ref["energy"]), what="translated energy")
        assert_close(out["forces"], ref["forces"], np.abs(ref["forces"]).max(), what="translated forces")
        energies, forces, _ = evaluate_batch(potential, [atoms, moved])
        assert_close(energies[1], energies[0], abs(energies[0]), what="translated energy (not recentred)")
        assert_close(forces[1], forces[0], np.abs(forces[0]).max(), what="translated forces (not recentred)")

    _over(INVARIANCE_STRUCTURES, atoms, check)


def check_permutation_invariance(potential, atoms: Optional[Atoms] = None) -> None:
    """Reordering the atoms reorders the forces and changes neither energy nor stress."""

    def check(atoms):
        ref = evaluate(potential, atoms)
        perm = np.random.default_rng(1).permutation(len(atoms))
        out = evaluate(potential, atoms[perm])
        assert_close(out["energy"], ref["energy"], abs(ref["energy"]), what="permuted energy")
        assert_close(out["forces"], ref["forces"][perm], np.abs(ref["forces"]).max(), what="permuted forces")
        if "stress" in ref:
            assert_close(out["stress"], ref["stress"], np.abs(ref["stress"]).max(), what="permuted stress")

    _over(INVARIANCE_STRUCTURES, atoms, check)


def check_image_invariance(potential, atoms: Optional[Atoms] = None) -> None:
    """Moving atoms by whole lattice vectors along periodic directions (another choice of images), and
    wrapping them back into the cell, changes nothing."""

    def check(atoms):
        ref = evaluate(potential, atoms)
        shifted = atoms.copy()
        rng = np.random.default_rng(2)
        n = rng.integers(-2, 3, size=(len(atoms), 3)) * atoms.pbc
        shifted.positions += n @ atoms.cell.array
        out = evaluate(potential, shifted)
        assert_close(out["energy"], ref["energy"], abs(ref["energy"]), what="energy (images)")
        assert_close(out["forces"], ref["forces"], np.abs(ref["forces"]).max(), what="forces (images)")
        shifted.wrap()
        out = evaluate(potential, shifted)
        assert_close(out["energy"], ref["energy"], abs(ref["energy"]), what="energy (wrapped)")
        assert_close(out["stress"], ref["stress"], np.abs(ref["stress"]).max(), what="stress (wrapped)")

    _over(IMAGE_STRUCTURES, atoms, check)


def check_rotation_invariance(potential, atoms: Optional[Atoms] = None,
                              rotations: Optional[np.ndarray] = None, stress: bool = True) -> None:
    """Rotating the structure leaves the energy unchanged and rotates forces and stress, exactly (to
    ``SYMMETRY_TOL``) for ``rotations`` [k, 3, 3]: by default those the model declares
    (:func:`declared_rotations`, e.g. a Platonic group; other rotations change such a model's energy
    and are not checked), else three random rotations. The rotated copies are evaluated in one batch."""
    if rotations is None:
        rotations = declared_rotations(potential)
    if rotations is None:
        from scipy.spatial.transform import Rotation

        rotations = Rotation.random(3, random_state=0).as_matrix()

    def check(atoms):
        ref = evaluate(potential, atoms)
        energies, forces, stresses = evaluate_batch(potential, [rotated(atoms, R) for R in rotations])
        for k, (R, e, f, s) in enumerate(zip(rotations, energies, forces, stresses)):
            assert_close(e, ref["energy"], abs(ref["energy"]), what=f"energy (rotation {k})")
            assert_close(f, ref["forces"] @ R.T, np.abs(ref["forces"]).max(), what=f"forces (rotation {k})")
            if stress and "stress" in ref:
                assert_close(s, R @ ref["stress"] @ R.T, np.abs(ref["stress"]).max(),
                             what=f"stress (rotation {k})")

    _over(INVARIANCE_STRUCTURES, atoms, check)


def check_invariance(potential, atoms: Optional[Atoms] = None) -> None:
    """Translation, permutation and rotation invariance, and (periodic structures) the choice of images."""
    check_translation_invariance(potential, atoms)
    check_permutation_invariance(potential, atoms)
    check_rotation_invariance(potential, atoms)
    if atoms is None:
        check_image_invariance(potential)
    elif atoms.pbc.any():
        check_image_invariance(potential, atoms)


# ----------------------------------------------------------------------------------------- locality
def check_small_cell_images(potential, atoms: Optional[Atoms] = None, repeat=(2, 2, 2)) -> None:
    """A periodic cell (by default ones smaller than the cutoff, where every image matters) and its
    supercell have the same energy per atom, forces and stress."""

    def check(atoms):
        ref = evaluate(potential, atoms)
        big = atoms * tuple(repeat)
        n = int(np.prod(repeat))
        out = evaluate(potential, big)
        assert_close(out["energy"], n * ref["energy"], abs(n * ref["energy"]), what="supercell energy")
        assert_close(out["forces"][: len(atoms)], ref["forces"], np.abs(ref["forces"]).max(),
                     what="supercell forces")
        assert_close(out["stress"], ref["stress"], np.abs(ref["stress"]).max(), what="supercell stress")

    _over(SUPERCELL_STRUCTURES, atoms, check)


def check_extensivity(potential, atoms: Optional[Atoms] = None) -> None:
    """Two copies of a molecule further apart than the cutoff have twice its energy."""
    a = far_molecule() if atoms is None else atoms
    b = a.copy()
    b.positions += np.array([0.0, 0.0, 3 * potential.cutoff])
    e_a = evaluate(potential, a)["energy"]
    e_both = evaluate(potential, a + b)["energy"]
    assert_close(e_both, 2 * e_a, abs(2 * e_a), what="energy of two far-apart copies")


def _probe_props(calc, distance: float, cutoff: float) -> Tuple[float, np.ndarray, np.ndarray]:
    atoms = cluster_with_probe(distance, cutoff)
    atoms.calc = calc
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()


def check_cutoff_continuity(potential) -> None:
    """A probe atom just beyond the cutoff does not interact; just inside, its share of energy, force
    and stress vanishes as it approaches the cutoff (a C² envelope: energy ~ δ³, force ~ δ²)."""
    rc = potential.cutoff
    calc = calc64(potential)
    e_out, f_out, s_out = _probe_props(calc, rc + 1e-3, rc)
    assert np.abs(f_out[4]).max() == 0.0, f"force on a probe beyond the cutoff {np.abs(f_out[4]).max():.3e}"
    e_far, _, _ = _probe_props(calc, rc + 0.5, rc)
    assert_approx(e_out, e_far, rel=1e-13, abs=1e-13, what="energy with the probe beyond the cutoff")

    deltas = [1e-2, 1e-3, 1e-4]
    d_e, d_f, d_s = [], [], []
    for delta in deltas:
        e, f, s = _probe_props(calc, rc - delta, rc)
        d_e.append(abs(e - e_out))
        d_f.append(np.abs(f[4]).max())
        d_s.append(np.abs(s - s_out).max())
    assert d_e[0] > 0 and d_f[0] > 0, "the probe does not interact inside the cutoff"
    for k in range(2):  # each 10× step closer to r_c shrinks the jumps by ≳ 10² (force) / 10³ (energy)
        assert d_e[k + 1] <= d_e[k] / 300 + 1e-14, f"energy jumps at the cutoff: {d_e}"
        assert d_f[k + 1] <= d_f[k] / 30 + 1e-14, f"force jumps at the cutoff: {d_f}"
        assert d_s[k + 1] <= d_s[k] / 30 + 1e-14, f"stress jumps at the cutoff: {d_s}"


def check_smooth_scan(potential, radius: Optional[float] = None) -> None:
    """Scan a probe through ``radius`` (default: the cutoff; 41 points over ±0.05 Å): E, F and σ have
    no jumps, and the slope of E is the force."""
    rc = potential.cutoff
    radius = rc if radius is None else radius
    calc = calc64(potential)
    distances = np.linspace(radius - 0.05, radius + 0.05, 41)
    step = distances[1] - distances[0]
    vals = [_probe_props(calc, d, rc) for d in distances]
    energies = np.array([v[0] for v in vals])
    forces = np.array([v[1][4, 0] for v in vals])
    stresses = np.array([v[2] for v in vals])
    # dE/dr = −F_x(probe): the finite-difference slope matches the mean force of the two ends. That is
    # the trapezoid rule, off by h²/12·|F″| ≈ |ΔΔF|/12; allow 3× that (or 1e-3 of the largest force).
    slope = np.diff(energies) / step
    mid_force = 0.5 * (forces[1:] + forces[:-1])
    trapezoid = np.abs(np.diff(forces, 2)).max() / 4
    err = np.abs(slope + mid_force).max()
    bound = max(trapezoid, 1e-3 * np.abs(forces).max()) + 1e-9
    assert err <= bound, f"scan through {radius} Å: slope of E differs from −F by {err:.3e} (≤ {bound:.3e})"
    # Consecutive differences are bounded by (max derivative) × step: no discontinuity.
    jump = np.abs(np.diff(forces)).max()
    bound = 10 * step * np.abs(np.diff(forces) / step).mean() + 1e-12
    assert jump <= bound, f"scan through {radius} Å: force jumps by {jump:.3e} (bound {bound:.3e})"
    # Every stress component: no difference stands out from both of its neighbours. (A bound by the mean
    # difference, as for the force, is too tight here: the components other than σ_xx are 10⁻⁴ of it and
    # change fastest at the start of the scan; max/mean reached 10.5 for a smooth one.) On a smooth curve
    # neighbouring differences are alike: where the probe's share vanishes like δ³ at r_c, the n-th step
    # inside is (n/(n+1))² of the step before it, so every difference is at most 1.1× its larger
    # neighbour (the first one, (20/19)²). A jump J makes one difference J against O(step·|σ'|) beside it.
    d_stress = np.abs(np.diff(stresses, axis=0))
    zero = np.zeros_like(d_stress[:1])
    larger_neighbour = np.maximum(np.concatenate([zero, d_stress[:-1]]), np.concatenate([d_stress[1:], zero]))
    assert np.all(d_stress <= 3 * larger_neighbour + 1e-14), (
        f"scan through {radius} Å: stress jumps, difference / larger neighbour per component "
        f"{(d_stress / (larger_neighbour + 1e-300)).max(axis=0)}")


def check_cutoff_smoothness(potential) -> None:
    """Energy, forces and stress are continuous as a neighbour crosses the cutoff."""
    check_cutoff_continuity(potential)
    check_smooth_scan(potential)


# ------------------------------------------------------------------------------------------ outputs
def validate_outputs(potential, structures: Optional[Sequence[Atoms]] = None) -> None:
    """The potential's outputs for a batch (default: the suite's structures) have the documented keys,
    shapes and dtype (float64 in, float64 out): ``energy`` [n_graphs], ``energies`` [n_atoms] summing to
    it, ``forces`` [n_atoms, 3], ``stress`` [n_graphs, 6], finite, with NaN stress for a structure without
    a cell; through the calculator ``free_energy`` is the energy and the stress of a molecule is refused."""
    from ase.calculators.calculator import PropertyNotImplementedError

    from mlip.graph import batch_atoms

    structures = [f() for f in STRUCTURES.values()] if structures is None else list(structures)
    graph = batch_atoms(structures, potential.cutoff, dtype=torch.float64)
    out = potential(graph)
    n_graphs, n_atoms = len(structures), sum(len(a) for a in structures)
    shapes = {"energy": (n_graphs,), "energies": (n_atoms,), "forces": (n_atoms, 3), "stress": (n_graphs, 6)}
    for key, shape in shapes.items():
        assert key in out, f"output {key!r} missing (got {sorted(out)})"
        assert tuple(out[key].shape) == shape, f"{key} has shape {tuple(out[key].shape)}, not {shape}"
        assert out[key].dtype == torch.float64, f"{key} has dtype {out[key].dtype} for float64 input"
    for key in ("energy", "energies", "forces"):
        assert bool(torch.isfinite(out[key]).all()), f"{key} is not finite"
    has_cell = torch.tensor([a.cell.rank == 3 for a in structures])
    stress = out["stress"].detach()
    assert bool(torch.isfinite(stress[has_cell]).all()), "stress of a structure with a cell is not finite"
    assert bool(torch.isnan(stress[~has_cell]).all()), "stress without a volume is not NaN"
    sums = torch.zeros(n_graphs, dtype=torch.float64).index_add_(0, graph.batch, out["energies"].detach())
    err = float((sums - out["energy"].detach()).abs().max())
    scale = max(1.0, float(out["energy"].detach().abs().max()))
    assert err <= 1e-12 * scale, f"per-atom energies sum to the energy ± {err:.3e}"

    atoms = triclinic_crystal()
    atoms.calc = calc64(potential)
    e = atoms.get_potential_energy()
    assert_approx(atoms.get_potential_energies().sum(), e, rel=1e-12, abs=1e-12, what="Σ per-atom energies")
    assert atoms.calc.get_property("free_energy", atoms) == e, "free_energy differs from energy"
    molecule = far_molecule()
    molecule.calc = calc64(potential)
    try:
        molecule.get_stress()
    except PropertyNotImplementedError as err:
        assert "stress needs a cell" in str(err), f"stress without a cell refused with {err!r}"
    else:
        raise AssertionError("stress of a structure without a cell was returned")


def check_batch_consistency(potential, structures: Optional[Sequence[Atoms]] = None) -> None:
    """Each structure of a batch (default: the suite's structures) has the energy (rel 1e-12), forces
    (1e-12) and stress (1e-13) it has alone; stress is NaN (never silently 0) without a volume."""
    from mlip.graph import AtomicGraph, batch_atoms

    structures = [f() for f in STRUCTURES.values()] if structures is None else list(structures)
    graph = batch_atoms(structures, potential.cutoff, dtype=torch.float64)
    out = potential(graph)
    offset = 0
    for k, atoms in enumerate(structures):
        single = potential(AtomicGraph.from_atoms(atoms, potential.cutoff))
        n = len(atoms)
        assert_approx(float(out["energy"][k].detach()), float(single["energy"][0].detach()), rel=1e-12,
                      abs=1e-12, what=f"structure {k}: energy in a batch")
        err = float((out["forces"][offset: offset + n] - single["forces"]).abs().max())
        assert err <= 1e-12, f"structure {k}: forces in a batch differ by {err:.3e}"
        if atoms.cell.rank == 3:
            err = float((out["stress"][k] - single["stress"][0]).abs().max())
            assert err <= 1e-13, f"structure {k}: stress in a batch differs by {err:.3e}"
        else:
            assert torch.isnan(out["stress"][k]).all(), f"structure {k}: stress without a volume is not NaN"
        offset += n


def check_float32_matches_float64(potential, atoms: Optional[Atoms] = None) -> None:
    """The float32 calculator agrees with the float64 one: energy to 1e-5 relative, forces to 1e-3 of the
    largest (float32 has ~6e-8 relative precision; sums over ~10⁴ terms lose ~2 digits). Default
    structure: a rattled 32-atom fcc Cu supercell."""
    from ase.build import bulk

    from mlip.calculators import MLIPCalculator

    if atoms is None:
        atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 2)
        atoms.rattle(0.05, seed=0)
    atoms.calc = MLIPCalculator(potential, device="cpu", dtype="float64")
    e64, f64 = atoms.get_potential_energy(), atoms.get_forces()
    atoms.calc = MLIPCalculator(potential, device="cpu", dtype="float32")
    e32, f32 = atoms.get_potential_energy(), atoms.get_forces()
    assert_approx(e32, e64, rel=1e-5, abs=1e-12, what="float32 energy against float64")
    err = np.abs(f32 - f64).max()
    assert err <= 1e-3 * np.abs(f64).max(), f"float32 forces differ from float64 by {err:.3e}"


# ------------------------------------------------------------------------------- dynamics and files
def check_nve(potential, steps: int = 1000) -> Dict[str, float]:
    """Velocity Verlet (1 fs, ``steps`` steps from 300 K) conserves the energy of EMT copper plus the
    model; returns the measured drift (meV/atom/ps), spread and exchanged energies (meV/atom) and the
    final temperature (K). The potential must be built for Cu; it is not modified.

    An untrained model has no reason to favour any lattice: on its own the crystal can collapse and
    heat to thousands of kelvin, which tests the integrator's step size rather than the forces. EMT
    supplies a bounded, stable landscape; the model's forces are scaled to the same size as EMT's
    (max 0.2 eV/Å for a 0.03 Å rattle), so the model contributes a large part of the potential-energy
    exchange. A non-conservative or discontinuous model force shows up as drift of the total energy.
    """
    from ase import units
    from ase.build import bulk
    from ase.calculators.emt import EMT
    from ase.calculators.mixing import SumCalculator
    from ase.md.velocitydistribution import Stationary, thermalize_momenta
    from ase.md.verlet import VelocityVerlet

    potential = copy.deepcopy(potential)  # its scale is changed below
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 2)  # 32 atoms
    atoms.rattle(0.03, seed=0)
    atoms.calc = calc64(potential)
    with torch.no_grad():
        potential.scale.mul_(0.2 / np.abs(atoms.get_forces()).max())
    model = calc64(potential)
    atoms.calc = SumCalculator([EMT(), model])
    thermalize_momenta(atoms, temperature_K=300, rng=np.random.default_rng(0))
    Stationary(atoms)
    dyn = VelocityVerlet(atoms, timestep=1.0 * units.fs)
    energies, potential_energies, model_energies = [], [], []

    def record():
        potential_energies.append(atoms.get_potential_energy())
        model_energies.append(model.results["energy"])
        energies.append(potential_energies[-1] + atoms.get_kinetic_energy())

    dyn.attach(record, interval=10)
    dyn.run(steps)
    n = len(atoms)
    energies = np.array(energies) / n
    exchanged = (max(potential_energies) - min(potential_energies)) / n * 1e3  # meV/atom
    model_exchanged = (max(model_energies) - min(model_energies)) / n * 1e3
    times = np.arange(len(energies)) * 10e-3  # ps
    drift = np.polyfit(times, energies, 1)[0] * 1e3  # meV/atom/ps
    spread = (energies.max() - energies.min()) * 1e3
    # Velocity Verlet at 1 fs conserves a smooth potential's energy to O(dt²) fluctuations without
    # systematic drift; a non-conservative or discontinuous force field drifts by meV/atom/ps or more.
    assert np.isfinite(energies).all(), "the total energy is not finite"
    # The check means something only if kinetic and potential energy really exchange, through the
    # model's energy as well as EMT's.
    assert exchanged > 1.0, f"potential energy varies by only {exchanged:.3f} meV/atom"
    assert model_exchanged > 1.0, f"the model's energy varies by only {model_exchanged:.3f} meV/atom"
    assert spread < 0.01 * exchanged, (f"total energy spread {spread:.4f} meV/atom against "
                                       f"{exchanged:.3f} meV/atom exchanged")
    assert abs(drift) < 0.05, f"energy drift {drift:.4f} meV/atom/ps"
    assert spread < 1.0, f"energy fluctuation {spread:.4f} meV/atom"
    return dict(drift=drift, spread=spread, exchanged=exchanged, model_exchanged=model_exchanged,
                temperature=atoms.get_temperature())


def _evaluate_in(potential, dtype: str, atoms: Atoms):
    from mlip.calculators import MLIPCalculator

    atoms = atoms.copy()
    atoms.calc = MLIPCalculator(potential, device="cpu", dtype=dtype)
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()


def check_save_load(potential, directory=None, atoms: Optional[Atoms] = None):
    """Save → load → evaluate is bit-identical to the original in float64 and float32 (energy, forces,
    stress of ``atoms``, default the triclinic crystal). The checkpoint is written to ``directory``
    (default: a temporary one); returns the loaded potential."""
    from mlip.checkpoint import load_potential, save_potential

    atoms = triclinic_crystal() if atoms is None else atoms
    if directory is None:
        with tempfile.TemporaryDirectory() as tmp:
            return check_save_load(potential, tmp, atoms)
    loaded = load_potential(save_potential(potential, Path(directory) / "model.safetensors"))
    for dtype in ("float64", "float32"):
        (e0, f0, s0), (e1, f1, s1) = _evaluate_in(potential, dtype, atoms), _evaluate_in(loaded, dtype, atoms)
        assert e0 == e1, f"{dtype} energy after save → load: {e1!r}, before {e0!r}"
        assert np.array_equal(f0, f1), f"{dtype} forces after save → load: off by {np.abs(f0 - f1).max():.3e}"
        assert np.array_equal(s0, s1), f"{dtype} stress after save → load: off by {np.abs(s0 - s1).max():.3e}"
    return loaded


def dimer_curve(potential, a: str, b: str, start_fraction=0.6, stop=0.1, n=120):
    """Distances [n] and energies E(r) [n] of the a–b dimer from ``start_fraction`` × (R_a + R_b) down
    to ``stop`` Å (float64)."""
    calc = calc64(potential)
    distances = dimer_distances(a, b, start_fraction, stop, n)
    energies = []
    for r in distances:
        atoms = dimer(a, b, r)
        atoms.calc = calc
        energies.append(atoms.get_potential_energy())
    return distances, np.array(energies)


def check_short_range_repulsion(potential, pairs: Optional[Sequence[Tuple[str, str]]] = None):
    """Whatever the weights, E rises monotonically as a dimer is pushed together, from 0.6 × the sum of
    covalent radii down to 0.1 Å. ``pairs`` default: ``DIMER_PAIRS`` when the potential has their
    elements, else every pair of its species. Returns {pair: (distances [n], energies [n])}."""
    if pairs is None:
        species = potential.species
        pairs: List[Tuple[str, str]] = [p for p in DIMER_PAIRS if set(p) <= set(species)]
        if len(pairs) < len(DIMER_PAIRS):
            pairs = [(s, t) for i, s in enumerate(species) for t in species[i:]]
    curves = {}
    for a, b in pairs:
        distances, energies = curves[(a, b)] = dimer_curve(potential, a, b)
        rises = np.diff(energies) > 0
        assert rises.all(), (f"{a}-{b}: E falls between {distances[1:][~rises].min():.3f} and "
                             f"{distances[1:][~rises].max():.3f} Å")
    return curves
