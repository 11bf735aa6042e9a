"""Absurd cells and coincident atoms are refused with a ValueError that names them (issue 35, item 3).

A periodic cell much smaller than any bond would need gigabytes of periodic images: it must be
refused from the cell alone, before any neighbour list is built. Two atoms at the same position
(or an atom on a periodic image of another) must be named, not reported as a non-finite energy.
"""

from __future__ import annotations

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk, fcc111
from ase.io import write

import mlip
import mlip.graph
from mlip.cli import main
from mlip.graph import batch_atoms
from mlip.structure_checks import MAX_NEIGHBORS_PER_ATOM, estimate_neighbors_per_atom
from mlip.models import create_model


@pytest.fixture
def no_neighbor_list(monkeypatch):
    """Fail the test if a neighbour list is built (the refusal must come before it)."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a neighbour list was built for a structure that should be refused")

    monkeypatch.setattr(mlip.graph, "batched_neighbor_list", forbidden)


TINY = [
    (Atoms("Cu", cell=[0.1] * 3, pbc=True), "[0.1, 0.1, 0.1]"),
    (Atoms("Cu", cell=[0.2] * 3, pbc=True), "[0.2, 0.2, 0.2]"),
    # slab whose in-plane cell is tiny; the non-periodic length plays no role
    (Atoms("Cu", cell=[0.1, 0.1, 10.0], pbc=[True, True, False]), "[0.1, 0.1, 10]"),
    # wire with a 0.001 Å period
    (Atoms("Cu", cell=[0.001, 0, 0], pbc=[True, False, False]), "[0.001, 0, 0]"),
    # one short lattice vector in an otherwise large cell: few atoms per volume (5 Å³ per atom),
    # but 6,000 images of every atom along the short vector
    (Atoms("Cu", cell=[0.002, 50.0, 50.0], pbc=True), "[0.002, 50, 50]"),
]


@pytest.mark.parametrize("atoms,lengths", TINY)
@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_tiny_cell_refused_before_neighbor_list(atoms, lengths, backend, no_neighbor_list):
    with pytest.raises(ValueError) as err:
        batch_atoms([atoms], 5.0, neighbor_backend=backend)
    msg = str(err.value)
    assert msg.startswith("periodic cell too small for the cutoff")
    assert f"cell lengths {lengths} Å" in msg
    assert f"pbc={atoms.pbc.tolist()}" in msg
    assert "cutoff 5 Å" in msg
    assert f"bound of {MAX_NEIGHBORS_PER_ATOM}" in msg
    assert "\n" not in msg
    with pytest.raises(ValueError, match="periodic cell too small"):
        mlip.AtomicGraph.from_atoms(atoms, 5.0)


def test_tiny_cell_named_in_a_batch(no_neighbor_list):
    with pytest.raises(ValueError, match=r"^structure 1: periodic cell too small .* about 65,450 neighbours"):
        batch_atoms([bulk("Cu"), Atoms("Cu", cell=[0.2] * 3, pbc=True)], 5.0)


def test_estimate_of_tiny_cells():
    # a 1-atom cube much smaller than the cutoff: density × sphere volume
    assert estimate_neighbors_per_atom(Atoms("Cu", cell=[0.1] * 3, pbc=True), 5.0) == pytest.approx(
        4 / 3 * np.pi * 125 / 1e-3)
    # a short lattice vector: the images along it, 2 × floor(6 / 0.002) − 2 (|T| < 6 strictly)
    assert estimate_neighbors_per_atom(Atoms("Cu", cell=[0.002, 50, 50], pbc=True), 6.0) == pytest.approx(
        5998, abs=2)
    # a non-periodic structure has no images
    assert estimate_neighbors_per_atom(Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 1]]), 6.0) == 0


def _wire(radius: float) -> Atoms:
    b = bulk("Cu", cubic=True).repeat((int(2 * radius / 3.61) + 2, int(2 * radius / 3.61) + 2, 1))
    p = b.positions - b.positions.mean(axis=0)
    wire = b[np.hypot(p[:, 0], p[:, 1]) < radius]
    wire.pbc = [False, False, True]
    return wire


def _real_structures():
    compressed = bulk("Cu")
    compressed.set_cell(compressed.cell * 0.6 ** (1 / 3), scale_atoms=True)  # 60 % of the volume
    thick_slab = fcc111("Cu", (1, 1, 150), vacuum=10.0)  # 2D periodic, ~300 Å thick
    thick_slab.pbc = [True, True, False]
    return [
        ("fcc Cu primitive", bulk("Cu")),
        ("fcc Cu primitive at 60 % volume", compressed),
        ("diamond primitive", bulk("C")),
        ("diamond at half volume", bulk("C", a=3.567 * 0.5 ** (1 / 3))),
        ("Cu 6x6x6 supercell", bulk("Cu", cubic=True).repeat(6)),
        ("Cu(111) slab", fcc111("Cu", (3, 3, 4), vacuum=8.0)),
        ("thick Cu(111) slab", thick_slab),
        ("Cu nanowire", _wire(30.0)),
    ]


@pytest.mark.parametrize("name,atoms", _real_structures(), ids=[n for n, _ in _real_structures()])
def test_real_structures_far_below_bound_and_estimate_close(name, atoms):
    cutoff = 6.0
    estimate = estimate_neighbors_per_atom(atoms, cutoff)
    assert estimate < MAX_NEIGHBORS_PER_ATOM / 4
    graph = batch_atoms([atoms], cutoff)  # accepted
    per_atom = np.bincount(graph.edge_index[0].numpy(), minlength=len(atoms))
    # an estimate, not an exact count, but never far below the busiest atom nor far above it
    assert 0.9 * per_atom.max() <= estimate <= 2.0 * per_atom.max()


def test_thick_slab_and_wire_are_estimated_from_the_atoms_within_reach():
    # counting every atom of the thick slab and of the wire as within reach of every other would
    # exceed the bound: the estimate must come from the atoms near each one
    for name, atoms in _real_structures()[-2:]:
        lattice = atoms.cell.array[atoms.pbc]
        average = (np.pi * 36.0 / np.linalg.norm(np.cross(*lattice)) if len(lattice) == 2
                   else 12.0 / np.linalg.norm(lattice[0]))
        assert len(atoms) * average > MAX_NEIGHBORS_PER_ATOM, name
        assert estimate_neighbors_per_atom(atoms, 6.0) < MAX_NEIGHBORS_PER_ATOM / 4, name


def test_small_cell_with_many_images_is_still_accepted():
    # a 1-atom cell whose lattice vectors (2.55 Å) are well below the cutoff: 78 images
    graph = batch_atoms([bulk("Cu")], 6.0)
    assert graph.n_edges == 78


# ------------------------------------------------------------------------------ coincident atoms
def test_coincident_atoms_in_a_molecule():
    atoms = Atoms("HCuOCu", positions=[[0, 0, 0], [2, 0, 0], [0, 2, 0], [2, 0, 0]])
    with pytest.raises(ValueError) as err:
        batch_atoms([atoms], 5.0)
    assert str(err.value) == (
        "atoms 1 (Cu) and 3 (Cu) are at the same position (distance 0 Å, below 0.0001 Å); "
        "remove the duplicate atom"
    )


def test_nearly_coincident_atoms_of_different_elements():
    atoms = Atoms("CuAu", positions=[[1, 1, 1], [1, 1, 1 + 1e-5]], cell=[6] * 3, pbc=True)
    match = r"^atoms 0 \(Cu\) and 1 \(Au\) are at the same position \(distance 1e-05 Å"
    with pytest.raises(ValueError, match=match):
        batch_atoms([atoms], 5.0)


def test_atom_on_periodic_image_of_another():
    atoms = Atoms("Cu2", positions=[[0, 0, 0], [3.61, 0, 0]], cell=[3.61] * 3, pbc=True)
    with pytest.raises(ValueError, match=r"^atom 0 \(Cu\) and the periodic image of atom 1 \(Cu\) shifted by "
                                         r"cell vectors \[-1, 0, 0\] are at the same position"):
        batch_atoms([atoms], 5.0)


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_coincident_atoms_named_within_their_structure_in_a_batch(backend):
    cu = bulk("Cu", cubic=True)
    dup = cu.copy()
    dup.positions[2] = dup.positions[3]
    match = r"^structure 1: atoms 2 \(Cu\) and 3 \(Cu\) are at the same position"
    with pytest.raises(ValueError, match=match):
        batch_atoms([cu, dup], 5.0, neighbor_backend=backend)


def test_close_but_distinct_atoms_accepted():
    atoms = Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 0.01]])
    assert batch_atoms([atoms], 5.0).n_edges == 2


# ------------------------------------------------------------------------------ calculator and CLI
@pytest.fixture(scope="module")
def calc():
    return mlip.MLIPCalculator(create_model("platonic", species=["Cu"], cutoff=5.0, channels=4, num_layers=1),
                               device="cpu", dtype="float32")


@pytest.mark.parametrize("side", [0.1, 0.2])
def test_calculator_refuses_tiny_cell(calc, side, no_neighbor_list):
    atoms = Atoms("Cu", cell=[side] * 3, pbc=True)
    atoms.calc = calc
    with pytest.raises(ValueError, match=rf"periodic cell too small for the cutoff: cell lengths \[{side}, "):
        atoms.get_potential_energy()


def test_calculator_names_coincident_atoms(calc):
    atoms = bulk("Cu", cubic=True)
    atoms.positions[1] = atoms.positions[0]
    atoms.calc = calc
    with pytest.raises(ValueError, match=r"^atoms 0 \(Cu\) and 1 \(Cu\) are at the same position"):
        atoms.get_potential_energy()


def test_calculator_normal_primitive_cell(calc):
    atoms = bulk("Cu")
    atoms.calc = calc
    assert np.isfinite(atoms.get_potential_energy())


def test_cli_one_line_error_for_tiny_cell(tmp_path, capsys, no_neighbor_list):
    path = tmp_path / "tiny.extxyz"
    write(path, Atoms("Cu", cell=[0.1] * 3, pbc=True))
    out = tmp_path / "out.extxyz"
    code = main(["relax", str(path), "--model", "default", "--device", "cpu", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "mlip: error: periodic cell too small for the cutoff: cell lengths [0.1, 0.1, 0.1] Å" in err
    assert not out.exists()
