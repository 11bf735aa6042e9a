"""Open energy terms (mlip.terms): built-in physical terms (ZBL, Lennard-Jones, Buckingham) and a user's own
by import path, each receiving the atomic numbers of the potential's species; their checkpoints; the
declaration of the old configs building the same model."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from ase import Atoms
from ase.build import bulk

import mlip
from mlip.checkpoint import CheckpointError, load_potential, read_header, save_potential
from mlip.models import create_model, create_model_from_config, get_architecture
from mlip.nn.embedded_atom import EmbeddedAtomEnergy
from mlip.potential import Potential
from mlip.repulsion import ZBLRepulsion
from mlip.testing import (SPECIES, STRUCTURES, check_cutoff_smoothness, check_forces_finite_difference,
                          check_stress_finite_difference)
from mlip.terms import term_specs

#: a user's term, written outside the package: a Morse pair term with a learned per-element weight, which
#: records the atomic numbers it was built for
USER_TERMS = '''
import torch
from mlip.repulsion import smooth_switch
from mlip.terms import EnergyTerm


class Morse(EnergyTerm):
    def __init__(self, atomic_numbers, cutoff, depth: float, width: float = 1.5, r0: float = 2.5):
        super().__init__()
        self.atomic_numbers = list(atomic_numbers)
        self.cutoff, self.depth, self.width, self.r0 = cutoff, depth, width, r0
        self.weight = torch.nn.Parameter(torch.tensor(self.atomic_numbers, dtype=torch.float32) / 50.0)

    def forward(self, species, edge_index, vectors):
        r = vectors.norm(dim=-1)
        x = torch.exp(-self.width * (r - self.r0))
        w = self.weight.to(r.dtype)
        pair = self.depth * (x * x - 2 * x) * w[species[edge_index[0]]] * w[species[edge_index[1]]]
        pair = pair * smooth_switch(r, 0.75 * self.cutoff, self.cutoff)
        return vectors.new_zeros(species.shape[0]).index_add(0, edge_index[0], 0.5 * pair)


class NotATerm(torch.nn.Module):
    pass
'''
SMALL = dict(num_radial=4, num_densities=2, hidden=8)
LJ = {"epsilon": {"Cu": 0.01, "Au": 0.02, "H": 0.005, "C": 0.01, "O": 0.01, "Cu-Au": 0.015},
      "sigma": {"Cu": 2.0, "Au": 2.3, "H": 1.0, "C": 1.5, "O": 1.4}}
BUCKINGHAM = {"a": 500.0, "rho": 0.3, "c": {"Cu-Cu": 1.0, "Cu-Au": 1.5, "Au-Au": 2.0}}


@pytest.fixture
def user_terms(tmp_path, monkeypatch):
    """The module ``my_package.pair`` (USER_TERMS), a user's package importable from a folder on sys.path."""
    (tmp_path / "my_package").mkdir()
    (tmp_path / "my_package" / "__init__.py").write_text("")
    (tmp_path / "my_package" / "pair.py").write_text(textwrap.dedent(USER_TERMS))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("my_package", "my_package.pair"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield "my_package.pair"
    for name in ("my_package", "my_package.pair"):
        sys.modules.pop(name, None)


class NoNetwork(torch.nn.Module):
    """A network that contributes nothing: the potential's energy is its terms'."""

    def forward(self, species, edge_index, edge_vectors, batch, n_graphs):
        return edge_vectors.new_zeros(species.shape[0])


def terms_only(terms, species=SPECIES, repulsion=None):
    return Potential(NoNetwork(), species, 4.0, "none", repulsion=repulsion, terms=terms).double().eval()


def frames():
    """The suite's Cu-Au crystals."""
    return [STRUCTURES["triclinic"](), STRUCTURES["small_pair"]()]


def evaluate(potential):
    return potential.double()(mlip.batch_atoms(frames(), potential.cutoff, dtype=torch.float64))


def assert_bitwise(a, b):
    assert set(a) == set(b)
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_a_users_term_by_import_path_gets_the_atomic_numbers_and_adds_its_energy_in_ev(user_terms):
    declared = {f"{user_terms}:Morse": {"depth": 0.3}}
    plain = create_model("embedded_atom", ["Au", "Cu"], 4.0, seed=0, **SMALL)
    potential = create_model("embedded_atom", ["Au", "Cu"], 4.0, seed=0, terms=declared, **SMALL)
    term = potential.terms["my_package_pair:Morse"]
    assert type(term).__name__ == "Morse" and term.atomic_numbers == [79, 29] and term.cutoff == 4.0
    assert potential.term_specs == {"my_package.pair:Morse": {"depth": 0.3, "width": 1.5, "r0": 2.5}}
    graph = mlip.batch_atoms(frames(), 4.0, dtype=torch.float64)
    vec = mlip.edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts)
    with torch.no_grad():
        own = term.double()(potential.species_index(graph.numbers), graph.edge_index, vec)
    out, without = evaluate(potential), evaluate(plain)
    # a physical term: added after the scale and the reference energies, not multiplied by the scale
    assert torch.equal(out["energies"].detach(), without["energies"].detach() + own)
    assert own.abs().max() > 1e-3


def test_a_users_term_round_trips_through_a_checkpoint_and_is_imported_to_load(user_terms, tmp_path,
                                                                               monkeypatch):
    potential = create_model("embedded_atom", ["Cu", "Au"], 4.0, seed=0,
                             terms={f"{user_terms}:Morse": {"depth": 0.3, "r0": 2.4}}, **SMALL)
    with torch.no_grad():
        potential.terms["my_package_pair:Morse"].weight.mul_(1.1)  # a trained weight, stored in the file
    path = save_potential(potential, tmp_path / "user.safetensors")
    header = read_header(path)
    assert header["terms"] == {"my_package.pair:Morse": {"depth": 0.3, "width": 1.5, "r0": 2.4}}
    loaded = load_potential(path)
    assert torch.equal(loaded.state_dict()["terms.my_package_pair:Morse.weight"],
                       potential.state_dict()["terms.my_package_pair:Morse.weight"])
    assert_bitwise(evaluate(loaded), evaluate(potential))
    # the module is imported by the loader: without it the file is refused, naming what to install
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
    for name in ("my_package", "my_package.pair"):
        sys.modules.pop(name)
    with pytest.raises(CheckpointError,
                       match="energy term 'my_package.pair:Morse': cannot import my_package"):
        load_potential(path)


def test_only_energy_terms_are_built_from_an_import_path(user_terms):
    for name, message in [("subprocess:Popen", "Popen in subprocess is a type, not an mlip.terms.EnergyTerm"),
                          ("os:system", "system in os is a builtin_function_or_method, not"),
                          (f"{user_terms}:NotATerm", "NotATerm in my_package.pair is a type, not"),
                          (f"{user_terms}:Missing", "Missing in my_package.pair is not defined"),
                          ("no_such_module_here:Term", "cannot import no_such_module_here"),
                          ("lj", "unknown energy term 'lj'; available: buckingham, embedded_atom, "
                                 "lennard_jones, zbl, or the import path")]:
        with pytest.raises(ValueError, match=message):
            term_specs({name: {"args": "rm -rf /"}})


@pytest.mark.parametrize("terms", [{"lennard_jones": LJ}, {"buckingham": {**BUCKINGHAM, "c": 1.0}},
                                   {"zbl": {"inner": 0.5, "outer": 0.7}},
                                   {"my_package.pair:Morse": {"depth": 0.3}}],
                         ids=["lennard_jones", "buckingham", "zbl", "user"])
def test_terms_pass_the_physics_suites_derivative_and_cutoff_checks(terms, user_terms):
    potential = terms_only(terms)
    if "zbl" in terms:  # switched off at 0.7 × the covalent-radius sum: only compressed structures feel it
        squeezed = bulk("Cu", "fcc", a=2.7) * (2, 1, 1)
        squeezed.symbols[1] = "Au"
        squeezed.rattle(0.05, seed=3)
        check_forces_finite_difference(potential, squeezed)
        check_stress_finite_difference(potential, squeezed)
        return
    check_forces_finite_difference(potential)
    check_stress_finite_difference(potential)
    check_cutoff_smoothness(potential)


def test_lennard_jones_is_the_formula_with_lorentz_berthelot_mixing():
    declared = {key: {k: v for k, v in LJ[key].items() if k in ("Cu", "Au", "Cu-Au")} for key in LJ}
    potential = terms_only({"lennard_jones": {**declared, "r_max": 4.0, "r_on": 3.5}}, species=["Cu", "Au"])
    calc = mlip.MLIPCalculator(potential, dtype="float64", device="cpu")
    for symbols, epsilon, sigma in [("Cu2", 0.01, 2.0), ("Au2", 0.02, 2.3), ("CuAu", 0.015, 2.15)]:
        for r in (1.9, 2.4, 3.2, 3.7, 4.1):
            atoms = Atoms(symbols, positions=[[0, 0, 0], [r, 0, 0]])
            atoms.calc = calc
            s6 = (sigma / r) ** 6
            t = min(max((r - 3.5) / 0.5, 0.0), 1.0)
            switch = 1 - 10 * t ** 3 + 15 * t ** 4 - 6 * t ** 5
            assert atoms.get_potential_energy() == pytest.approx(4 * epsilon * (s6 * s6 - s6) * switch,
                                                                 rel=1e-12, abs=1e-15), (symbols, r)


def test_bad_pair_parameters_are_refused_naming_the_problem():
    with pytest.raises(ValueError, match="epsilon has no value for the pair"):
        terms_only({"lennard_jones": {"epsilon": {"Cu": 0.01}, "sigma": 2.0}}, species=["Cu", "Au"])
    with pytest.raises(ValueError, match=r"c is given per pair \('A-B'\), not per element: 'Cu'"):
        terms_only({"buckingham": {"a": 1.0, "rho": 0.3, "c": {"Cu": 1.0}}}, species=["Cu"])
    with pytest.raises(ValueError, match="sigma must be a positive number"):
        terms_only({"lennard_jones": {"epsilon": 0.01, "sigma": 0}}, species=["Cu"])
    with pytest.raises(ValueError, match="'Cu-Ag' is neither an element nor a pair"):
        terms_only({"lennard_jones": {"epsilon": {"Cu-Ag": 0.1}, "sigma": 2.0}}, species=["Cu"])
    with pytest.raises(ValueError, match="r_max must be a positive number of Å up to the cutoff 4.0"):
        terms_only({"lennard_jones": {"epsilon": 0.01, "sigma": 2.0, "r_max": 5.0}}, species=["Cu"])
    with pytest.raises(TypeError, match="term 'lennard_jones' needs the argument"):
        term_specs({"lennard_jones": {"epsilon": 0.01}})
    with pytest.raises(ValueError, match="declared twice, as the repulsion and among the terms"):
        terms_only({"zbl": {}}, species=["Cu"], repulsion="zbl")


def test_an_old_config_builds_the_same_model_bit_identically(tmp_path):
    # the declaration as configs and checkpoints wrote it before terms took names and import paths
    config = tmp_path / "old.yaml"
    config.write_text("name: platonic\nspecies: [Cu, Au]\ncutoff: 4.0\nrepulsion: zbl\n"
                      "terms: {embedded_atom: {log_densities: true}}\ngroup: tetrahedral\nchannels: 4\n"
                      "num_layers: 1\nnum_heads: 2\nhead_dim: 2\n")
    potential = create_model_from_config(config, seed=3)
    # the same model put together as the code before did: the network, then the term built from the
    # number of species and the cutoff, under one seed; the ZBL repulsion from the atomic numbers
    hp = dict(group="tetrahedral", channels=4, num_layers=1, num_heads=2, head_dim=2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        network = get_architecture("platonic")(num_species=2, cutoff=4.0,
                                               **{**potential.hyperparameters, **hp})
        term = EmbeddedAtomEnergy(2, 4.0, log_densities=True)
    expected = {**{f"model.{k}": v for k, v in network.state_dict().items()},
                **{f"terms.embedded_atom.{k}": v for k, v in term.state_dict().items()}}
    state = potential.state_dict()
    assert set(state) - {"atomic_numbers", "reference_energies", "scale"} == set(expected)
    assert all(torch.equal(state[k], v) for k, v in expected.items())
    zbl = ZBLRepulsion([29, 79]).double()
    graph = mlip.batch_atoms(frames(), 4.0, dtype=torch.float64)
    vec = mlip.edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts)
    species = potential.species_index(graph.numbers)
    network, term = network.double(), term.double()
    with torch.no_grad():
        by_hand = term(species, graph.edge_index, vec)  # the term first, as the potential evaluates it
        by_hand = network(species, graph.edge_index, vec, graph.batch, graph.n_graphs) + by_hand
        offsets = torch.zeros(2, dtype=torch.float64)[species]  # scale 1, reference energies 0
        by_hand = by_hand * 1.0 + offsets + zbl(species, graph.edge_index, vec)
    assert torch.equal(evaluate(potential)["energies"].detach(), by_hand)


@pytest.mark.parametrize("where", ["docs/models.md", "mlip/terms/__init__.py"])
def test_the_documented_terms_build_as_written(where, user_terms):
    text = (Path(__file__).resolve().parents[2] / where).read_text(encoding="utf-8")
    block = re.search(r"\n( *)terms:\n((?:\1  .*\n)+)", text)
    declared = yaml.safe_load(textwrap.dedent(block.group(0)))["terms"]
    assert list(declared) == ["embedded_atom", "lennard_jones", "my_package.pair:Morse"]
    potential = create_model("embedded_atom", ["Cu", "Au"], 4.0, seed=0, repulsion="zbl", terms=declared,
                             **SMALL)
    assert [type(t).__name__ for t in potential.terms.values()] == ["EmbeddedAtomEnergy", "LennardJones",
                                                                    "Morse"]
    lj = potential.terms["lennard_jones"]
    assert lj.sigma[0, 1] == 2.5 and lj.epsilon[0, 1] == pytest.approx((0.40 * 0.44) ** 0.5, rel=1e-15)
