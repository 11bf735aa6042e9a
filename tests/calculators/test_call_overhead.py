"""What a calculator call reuses between calls (the graph builder's checks and tensors, the frozen
weights' isolated-atom energies, the platonic frames, the exact-state shortcut of check_state) gives
the same results as building everything anew, and is invalidated by every change it depends on."""

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk, molecule

import mlip
from mlip.graph import batch_atoms
from mlip.graph_builder import GraphBuilder
from mlip.models import create_model

CUTOFF = 4.5
ALLOWED = [29, 79]


def crystal(seed=0):
    atoms = bulk("Cu", "fcc", a=3.7, cubic=True).repeat((2, 1, 1))
    atoms.numbers[[1, 4]] = 79
    atoms.rattle(0.05, seed=seed)
    return atoms


def slab():
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
    atoms.pbc = [True, True, False]
    atoms.center(vacuum=4.0, axis=2)
    return atoms


def cluster():
    atoms = molecule("H2O")
    atoms.numbers[:] = [79, 29, 29]
    atoms.positions *= 1.4
    return atoms


def assert_same_graph(a, b):
    for name in ("positions", "numbers", "cell", "pbc", "batch", "edge_index", "shifts"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.device == y.device, name
        assert torch.equal(x, y), name
    assert a.cutoff == b.cutoff


def reference(atoms, dtype):
    return batch_atoms([atoms], CUTOFF, dtype=dtype, recenter=True, allowed_numbers=ALLOWED)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("make", [crystal, slab, cluster])
def test_builder_equals_batch_atoms_over_moves(make, dtype):
    builder = GraphBuilder(CUTOFF, dtype=dtype, allowed_numbers=ALLOWED)
    atoms = make()
    rng = np.random.default_rng(0)
    for _ in range(3):
        atoms.positions = atoms.positions + rng.normal(scale=0.02, size=atoms.positions.shape)
        assert_same_graph(builder(atoms), reference(atoms, dtype))


def test_builder_follows_changed_cell_numbers_and_pbc():
    builder = GraphBuilder(CUTOFF, dtype=torch.float64, allowed_numbers=ALLOWED)
    atoms = crystal()
    first = builder(atoms)
    changes = [
        lambda a: a.set_cell(a.cell.array * 1.03, scale_atoms=True),  # strained cell
        lambda a: a.set_cell(a.cell.array * 1.03, scale_atoms=False),  # cell alone
        lambda a: a.numbers.__setitem__(0, 79),  # an element swapped
        lambda a: a.set_pbc([True, True, False]),  # periodicity
        lambda a: a.set_pbc(False),
    ]
    for change in changes:
        change(atoms)
        graph = builder(atoms)
        assert_same_graph(graph, reference(atoms, torch.float64))
    assert not torch.equal(first.numbers, graph.numbers)
    assert not torch.equal(first.pbc, graph.pbc)


def test_builder_checks_every_call_after_a_valid_one():
    builder = GraphBuilder(CUTOFF, dtype=torch.float64, allowed_numbers=ALLOWED)
    atoms = crystal()
    builder(atoms)
    bad = atoms.copy()
    bad.positions[2] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        builder(bad)
    builder(atoms)
    bad = atoms.copy()
    bad.positions[3] = bad.positions[0]
    with pytest.raises(ValueError, match="same position"):
        builder(bad)
    builder(atoms)
    bad = atoms.copy()
    bad.numbers[0] = 13
    with pytest.raises(ValueError, match="not supported"):
        builder(bad)
    builder(atoms)
    bad = atoms.copy()
    bad.set_cell(bad.cell.array * 0.05, scale_atoms=True)
    with pytest.raises(ValueError, match="too small"):
        builder(bad)
    builder(atoms)
    with pytest.raises(ValueError, match="empty structure"):
        builder(Atoms(cell=np.eye(3) * 5, pbc=True))
    assert_same_graph(builder(atoms), reference(atoms, torch.float64))


def test_mixed_periodicity_bound_is_checked_with_the_positions_of_every_call():
    """For a slab the neighbour bound depends on the positions: atoms spread far apart along the
    non-periodic axis pass, the same atoms (same cell, numbers, pbc) brought together do not."""
    n = 40  # n × (π rc² / 1 Å²) lattice points above MAX_NEIGHBORS_PER_ATOM: the positions decide
    cell = np.diag([1.0, 1.0, 0.0])
    spread = Atoms(f"Cu{n}", positions=[[0.0, 0.0, 20.0 * k] for k in range(n)], cell=cell,
                   pbc=[True, True, False])
    builder = GraphBuilder(CUTOFF, dtype=torch.float64, allowed_numbers=ALLOWED)
    builder(spread)  # each atom has only its own images within reach
    packed = spread.copy()
    packed.positions[:, 2] = 0.01 * np.arange(n)
    with pytest.raises(ValueError, match="too small"):
        builder(packed)
    calc = mlip.MLIPCalculator(create_model("platonic", species=["Cu", "Au"], cutoff=CUTOFF, seed=0),
                               device="cpu", dtype="float64")
    spread.calc = calc
    spread.get_potential_energy()
    spread.positions = packed.positions
    with pytest.raises(ValueError, match="too small"):
        spread.get_potential_energy()


@pytest.fixture(scope="module")
def potential():
    potential = create_model("platonic", species=["Cu", "Au"], cutoff=CUTOFF, seed=0,
                             reference_energies=[-1.0, -2.0]).double()
    potential.isolated_reference = True  # reference energies are isolated-atom energies (cached per weights)
    return potential


def fresh_energy(potential, atoms):
    a = atoms.copy()
    a.calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float64")
    return a.get_potential_energy(), a.get_forces()


def test_calculator_equals_a_fresh_one_after_weights_change(potential):
    """The isolated-atom energies are reused while the weights are unchanged: changing them in
    place, replacing a parameter or loading a state dict must be seen."""
    calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float64")
    atoms = crystal()
    atoms.calc = calc
    atoms.get_potential_energy()
    model = calc.potential.model

    def in_place():
        with torch.no_grad():
            model.readout1.bias.add_(0.3)

    def replaced():
        model.readout1.bias = torch.nn.Parameter(model.readout1.bias.detach() - 0.7, requires_grad=False)

    def loaded():
        state = {k: v + 0.01 if v.is_floating_point() else v for k, v in calc.potential.state_dict().items()}
        calc.potential.load_state_dict(state)

    lone = Atoms("Au", positions=[[0.0, 0.0, 0.0]])  # no neighbours: exactly its reference energy
    lone.calc = calc
    for change in (in_place, replaced, loaded):
        before = atoms.get_potential_energy()
        change()
        atoms.positions = atoms.positions + 1e-3  # a new call
        lone.positions = lone.positions + 1e-3
        reference_energy = float(calc.potential.reference_energies[1])
        assert lone.get_potential_energy() == pytest.approx(reference_energy, abs=1e-12)
        calc.potential._isolated_cache = None  # the reference recomputes everything
        energy, forces = fresh_energy(calc.potential, atoms)
        assert atoms.get_potential_energy() == energy
        np.testing.assert_array_equal(atoms.get_forces(), forces)
        assert energy != pytest.approx(before, abs=1e-6)


def test_weights_state_sees_every_tensor_and_trainability(potential):
    state, trainable = potential._weights_state()
    assert len(state) == len(list(potential.parameters())) + len(list(potential.buffers()))
    assert trainable == any(p.requires_grad for p in potential.parameters())
    frozen = create_model("platonic", species=["Cu"], cutoff=CUTOFF, seed=0).requires_grad_(False)
    assert frozen._weights_state()[1] is False


def test_check_state_shortcut_only_for_identical_atoms(potential):
    calc = mlip.MLIPCalculator(potential, device="cpu", dtype="float64")
    calls = []
    original = calc.calculate

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    calc.calculate = counting
    atoms = crystal()
    atoms.calc = calc
    atoms.get_potential_energy()
    atoms.get_forces()
    atoms.get_stress()
    assert len(calls) == 1  # forces and stress came with the energy
    copy = atoms.copy()
    assert calc.check_state(copy) == []
    for change in (lambda a: a.positions.__setitem__((0, 0), a.positions[0, 0] + 1e-9),
                   lambda a: a.info.__setitem__("charge", 1),
                   lambda a: a.set_initial_magnetic_moments([1.0] * len(a)),
                   lambda a: a.set_pbc([True, True, False])):
        other = atoms.copy()
        change(other)
        assert calc.check_state(other) != []


def test_platonic_frames_and_dense_weights():
    potential = create_model("platonic", species=["Cu", "Au"], cutoff=CUTOFF, seed=0)
    model = potential.model
    for dtype in (torch.float32, torch.float64):
        frames = model.frames_as(dtype, "cpu")
        assert frames.dtype == dtype and torch.equal(frames, model.frames.to(dtype))
    aligned = model.frames_as(torch.float64, "cpu")
    model.orientation = "aligned" if model.orientation != "aligned" else "generic"
    assert not torch.equal(model.frames_as(torch.float64, "cpu"), aligned)
    layer = model.readout1
    G, co, ci = layer.group_order, layer.out_channels, layer.in_channels
    advanced = layer.kernel[layer.index].permute(0, 2, 1, 3).reshape(G * co, G * ci)
    assert torch.equal(layer.dense_weight(), advanced)
