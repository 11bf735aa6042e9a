"""A potential is a network plus declared terms: the term declaration, its checkpoints (new and of the
layout where the term sat inside the network), and the model interface the registry checks."""

import json

import pytest
import torch
from ase.build import bulk
from safetensors import safe_open
from safetensors.torch import save_file

import mlip
from mlip.checkpoint import HEADER_KEY, load_potential, read_header, save_potential
from mlip.models import create_model, get_architecture, register_architecture
from mlip.models.base import EnergyModel
from mlip.terms import term_specs

SPECIES = ["Cu", "Au"]
PLATONIC = dict(group="tetrahedral", channels=4, num_layers=1, num_heads=2, head_dim=2, density=True,
                density_log_densities=True, avg_neighbors=8.0)


def structures():
    a = bulk("Cu", "fcc", a=3.6, cubic=True)
    a.symbols[[1, 2]] = "Au"
    a.rattle(0.05, seed=1)
    b = bulk("Au", "fcc", a=4.0) * (2, 1, 1)
    b.rattle(0.05, seed=2)
    return [a, b]


def evaluate(potential):
    graph = mlip.batch_atoms(structures(), potential.cutoff, dtype=torch.float64)
    return potential.double()(graph)


def assert_bitwise(a, b):
    assert set(a) == set(b)
    for key in a:
        assert torch.equal(a[key], b[key]), key


def with_term(**terms_arguments):
    potential = create_model("platonic", SPECIES, 4.0, seed=0, terms={"embedded_atom": terms_arguments},
                             **PLATONIC)
    with torch.no_grad():
        potential.scale.fill_(0.7)
        potential.reference_energies.copy_(torch.tensor([-1.5, -2.5], dtype=torch.float64))
    return potential


def test_the_term_is_added_to_the_network_inside_the_scale():
    potential = with_term(log_densities=True).double()
    graph = mlip.batch_atoms(structures(), 4.0, dtype=torch.float64)
    vec = mlip.edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts)
    species = potential.species_index(graph.numbers)
    with torch.no_grad():
        network = potential.model(species, graph.edge_index, vec, graph.batch, graph.n_graphs)
        term = potential.terms["embedded_atom"](species, graph.edge_index, vec)
        repulsion = potential.repulsion(species, graph.edge_index, vec)
        out = potential(graph, compute_forces=False, compute_stress=False)
    expected = (network + term) * potential.scale + potential.reference_energies[species] + repulsion
    assert torch.equal(out["energies"], expected)
    # an atom alone: the network's and the term's outputs with no edges
    iso = potential.isolated_model_energies()
    none = torch.zeros((2, 0), dtype=torch.int64)
    index = torch.arange(2)
    with torch.no_grad():
        alone = potential.model(index, none, torch.zeros((0, 3), dtype=torch.float64), index, 2) + \
            potential.terms["embedded_atom"](index, none, torch.zeros((0, 3), dtype=torch.float64))
    assert torch.equal(iso.detach(), alone)


def test_new_checkpoints_round_trip_with_their_terms(tmp_path):
    potential = with_term(log_densities=True)
    path = save_potential(potential, tmp_path / "new.safetensors")
    header = read_header(path)
    assert header["format_version"] == 4
    assert header["terms"] == {"embedded_atom": term_specs({"embedded_atom": {"log_densities": True}})["embedded_atom"]}
    assert "embedded_atom" not in header["hyperparameters"]
    loaded = load_potential(path)
    assert loaded.term_specs == potential.term_specs
    assert_bitwise(evaluate(loaded), evaluate(potential))
    plain = create_model("platonic", SPECIES, 4.0, seed=0, repulsion=None, **PLATONIC)
    assert read_header(save_potential(plain, tmp_path / "plain.safetensors"))["format_version"] == 1


def old_layout(path, new_path, log_densities):
    """The file of ``path`` rewritten as the code before terms wrote it: the term a hyperparameter of the
    network, its tensors under model.embedded_atom., the log densities' tensors as attributes."""
    with safe_open(str(path), framework="pt") as fh:
        header = json.loads(fh.metadata()[HEADER_KEY])
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    header.pop("terms")
    header["format_version"] = 3
    header["hyperparameters"].update(embedded_atom=True, embedded_atom_log_densities=log_densities)
    renamed = {}
    for key, value in tensors.items():
        key = key.replace("terms.embedded_atom.", "model.embedded_atom.")
        key = key.replace("log_density.weights", "log_density_weights")
        key = key.replace("log_density.linear.weight", "log_density_in.weight")
        renamed[key] = value
    assert "model.embedded_atom.log_density_weights" in renamed or not log_densities
    assert "model.density.log_density_in.weight" in renamed
    save_file(renamed, str(new_path), metadata={HEADER_KEY: json.dumps(header)})
    return new_path


@pytest.mark.parametrize("log_densities", [False, True])
def test_checkpoints_of_the_old_layout_load_bit_identically(tmp_path, log_densities):
    potential = with_term(log_densities=log_densities)
    path = old_layout(save_potential(potential, tmp_path / "new.safetensors"), tmp_path / "old.safetensors",
                      log_densities)
    loaded = load_potential(path)
    assert loaded.term_specs == potential.term_specs
    assert "embedded_atom" not in loaded.hyperparameters
    assert_bitwise(evaluate(loaded), evaluate(potential))


def test_the_shipped_platonic_model_declares_its_term():
    potential = mlip.load_potential("platonic-emt")
    assert list(potential.terms) == ["embedded_atom"] and not potential.term_specs["embedded_atom"]["log_densities"]
    assert not any(key.startswith("model.embedded_atom.") for key in potential.state_dict())


def test_bad_term_declarations_are_refused():
    assert term_specs(["embedded_atom"]) == term_specs({"embedded_atom": None}) == term_specs({"embedded_atom": {}})
    with pytest.raises(ValueError, match="unknown energy term 'eam'"):
        term_specs({"eam": {}})
    with pytest.raises(TypeError, match="'log_density'.*did you mean 'log_densities'"):
        term_specs({"embedded_atom": {"log_density": True}})
    with pytest.raises(TypeError, match="hidden must be"):
        term_specs({"embedded_atom": {"hidden": "wide"}})
    with pytest.raises(ValueError, match="declared twice"):
        term_specs(["embedded_atom", {"embedded_atom": {}}])
    with pytest.raises(TypeError, match="hyperparameter"):  # the flag of the architectures is gone
        create_model("platonic", SPECIES, 4.0, embedded_atom=True)
    with pytest.raises(ValueError, match="density=True or an energy term"):
        create_model("platonic", SPECIES, 4.0, attention_cutoff=3.0)
    # with a term, a shorter attention radius filters the network's edges (the term still sees them all)
    reach = create_model("platonic", SPECIES, 4.0, attention_cutoff=3.0, terms=["embedded_atom"], seed=0)
    short = create_model("platonic", SPECIES, 3.0, seed=0)
    short.model.load_state_dict(reach.model.state_dict())
    graph = mlip.batch_atoms(structures(), 4.0, dtype=torch.float64)
    vec = mlip.edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts)
    near = mlip.batch_atoms(structures(), 3.0, dtype=torch.float64)
    vec_near = mlip.edge_vectors(near.positions, near.cell, near.batch, near.edge_index, near.shifts)
    species = reach.species_index(graph.numbers)
    with torch.no_grad():
        torch.testing.assert_close(reach.model.double()(species, graph.edge_index, vec, graph.batch, 2),
                                   short.model.double()(species, near.edge_index, vec_near, near.batch, 2),
                                   rtol=1e-12, atol=1e-12)


class NoForward(torch.nn.Module):
    def __init__(self, num_species, cutoff):
        super().__init__()


class WrongForward(EnergyModel):
    def __init__(self, num_species, cutoff, width=3):
        super().__init__()

    def forward(self, species, edge_index, positions, batch, n_graphs):
        return species


class NoDefault(EnergyModel):
    def __init__(self, num_species, cutoff, width):
        super().__init__()

    def forward(self, species, edge_index, edge_vectors, batch, n_graphs):
        return species


@pytest.mark.parametrize("cls, message", [(NoForward, "defines no forward"), (WrongForward, "forward takes"),
                                          (NoDefault, "width have no default"), (int, "not an nn.Module class")])
def test_the_registry_checks_the_model_interface(cls, message):
    register_architecture("broken", f"{__name__}:{cls.__name__}" if cls is not int else "builtins:int")
    try:
        with pytest.raises(TypeError, match=message):
            get_architecture("broken")
    finally:
        from mlip import models

        models._REGISTRY.pop("broken")
    for name in ("platonic", "equiformer_v3", "embedded_atom"):
        assert issubclass(get_architecture(name), EnergyModel)
