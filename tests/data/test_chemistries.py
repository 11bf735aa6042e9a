"""mlip.data.chemistries: compositions over many chemistries on stoichiometric prototypes, and their
variants (``mlip data chemistries``)."""

from collections import Counter
from math import gcd

import numpy as np
import pytest
from ase.calculators.emt import EMT
from ase.data import atomic_numbers, covalent_radii
from ase.formula import Formula
from ase.io import read
from ase.neighborlist import neighbor_list

from mlip.cli import main
from mlip.data.chemistries import (CHGNET_ELEMENTS, FAMILY_ANIONS, FAMILY_WEIGHTS, KINDS, MAX_ATOMS,
                                   MIN_CONTACT_FRACTION, NON_METALS, OXIDATION_STATES, PROTOTYPES,
                                   UNARY_PROTOTYPES, BondLengths, Composition, compositions,
                                   generate_chemistries, summarize)

# a small set with every family: anions of each, alkali/alkaline-earth/transition/post-transition metals
ELEMENTS = ["H", "Li", "B", "C", "N", "O", "F", "Na", "Mg", "Al", "Si", "P", "S", "Cl", "Ti", "Fe", "Cu",
            "Sr", "I", "Cs", "La", "Pb"]
UNARY_ELEMENTS = ["Cu", "Si", "O", "Cs"]


def _reduced(counts):
    g = 0
    for n in counts:
        g = gcd(g, int(n))
    return tuple(int(n) // g for n in counts)


def _pair_ratios(atoms):
    """distance / (sum of covalent radii) of every pair within 6 Å, computed here independently."""
    i, j, d = neighbor_list("ijd", atoms, 6.0)
    radii = covalent_radii[atoms.numbers]
    return d / (radii[i] + radii[j])


@pytest.mark.parametrize("name", sorted(PROTOTYPES))
def test_each_prototype_has_its_stoichiometry_and_touches_at_one_bond(name):
    proto = PROTOTYPES[name]
    symbols = ("Na", "Mg", "Al")[: len(proto.counts) - 1] + (("O",) if proto.kind == "ionic" else ("Cu",))
    comp = Composition("test", name, symbols, False, ("O",) if proto.kind == "ionic" else ())
    atoms = comp.cell(BondLengths(list(symbols)))
    found = Counter(atoms.get_chemical_symbols())
    assert _reduced([found[s] for s in symbols]) == _reduced(proto.counts), (name, found)
    assert comp.formula == Formula.from_dict(found).reduce()[0].format("metal")
    assert atoms.pbc.all() and len(atoms) <= 16
    # the contact rule: no bonding pair shorter than its bond length, at least one at it
    lengths = BondLengths(list(symbols))
    i, j, d = neighbor_list("ijd", atoms, 8.0)
    anion = np.isin(atoms.get_chemical_symbols(), comp.anions)
    bonding = anion[i] != anion[j] if comp.anions else np.ones(len(i), bool)
    ratio = d[bonding] / lengths.bond[atoms.numbers[i[bonding]], atoms.numbers[j[bonding]]]
    assert ratio.min() >= 1 - 1e-6
    assert (_pair_ratios(atoms) >= 0.85 - 1e-6).all()


@pytest.mark.parametrize("name", UNARY_PROTOTYPES)
def test_unary_prototypes_sit_at_the_elements_nearest_neighbour_distance(name):
    from mlip.data.structures import min_distance, nearest_neighbor_distance

    atoms = Composition("unary", name, ("Cu",), False).cell(BondLengths(["Cu"]))
    assert set(atoms.get_chemical_symbols()) == {"Cu"}
    assert min_distance(atoms) == pytest.approx(nearest_neighbor_distance("Cu"), rel=1e-6)


def test_no_unary_of_the_default_elements_collapses():
    from ase.data import vdw_radii

    from mlip.data.chemistries import MOLECULAR
    from mlip.data.structures import min_distance

    lengths = BondLengths(list(CHGNET_ELEMENTS))
    for symbol in CHGNET_ELEMENTS:
        d = min_distance(Composition("unary", "fcc", (symbol,), False).cell(lengths))
        assert d >= 1.5, symbol  # solid hydrogen's is the shortest: r_cov + r_vdW = 1.51 Å
        if symbol in MOLECULAR:
            z = atomic_numbers[symbol]
            assert d == pytest.approx(covalent_radii[z] + vdw_radii[z])


def test_drawn_compositions_follow_the_families_and_balance_charges():
    comps = compositions(ELEMENTS, 300, seed=1)
    unaries = [c for c in comps if c.family == "unary"]
    assert len(unaries) == len(UNARY_PROTOTYPES) * len(ELEMENTS)
    drawn = comps[len(unaries):]
    assert len(drawn) == 300
    assert set(c.family for c in drawn) == set(FAMILY_WEIGHTS)
    assert Counter(c.family for c in drawn).most_common(1)[0][0] == "oxide"  # the largest family
    assert {len(c.symbols) for c in drawn} == {2, 3}
    for c in drawn:
        proto = PROTOTYPES[c.prototype]
        assert len(set(c.symbols)) == len(c.symbols) == len(proto.counts)
        if c.family == "intermetallic":
            assert proto.kind == "intermetallic" and not c.anions
            continue
        anion = c.symbols[-1]
        assert c.anions == (anion,) and anion in FAMILY_ANIONS[c.family]
        if c.family == "hydride":  # metal hydrides only
            assert not set(c.symbols[:-1]) & NON_METALS
        if c.charge_balanced:  # some oxidation states of the cations balance the anions
            from itertools import product

            charge = FAMILY_ANIONS[c.family][anion]
            assert any(sum(q * n for q, n in zip(states, proto.counts)) == -charge * proto.counts[-1]
                       for states in product(*(OXIDATION_STATES[s] for s in c.symbols[:-1])))
    assert 0.3 < np.mean([c.charge_balanced for c in drawn if c.family != "intermetallic"]) < 0.95


def test_default_elements_are_chgnets_89():
    assert len(CHGNET_ELEMENTS) == len(set(CHGNET_ELEMENTS)) == 89
    assert "Pu" in CHGNET_ELEMENTS and "Po" not in CHGNET_ELEMENTS
    assert all(s in atomic_numbers for s in CHGNET_ELEMENTS)


@pytest.fixture(scope="module")
def frames():
    """Drawn compositions of ELEMENTS, then the unaries of four elements."""
    return (generate_chemistries(ELEMENTS, 40, seed=3, unaries=False, progress=False)
            + generate_chemistries(UNARY_ELEMENTS, 0, seed=3, progress=False))


def test_frames_carry_kind_id_group_family_and_prototype(frames):
    ids = [f.info["id"] for f in frames]
    assert len(ids) == len(set(ids))
    assert {f.info["config_type"] for f in frames} == set(KINDS) - {"md"}
    for f in frames:
        info = f.info
        assert info["family"] in set(FAMILY_WEIGHTS) | {"unary"}
        group = Formula(info["group"]).count()
        assert set(f.get_chemical_symbols()) <= set(group), (info["id"], info["group"])
        if info["config_type"] in ("crystal", "strained", "rattled"):  # whole cells keep the composition
            reduced = Formula(f.get_chemical_formula()).reduce()[0].format("metal")
            assert reduced + ("1" if info["family"] == "unary" else "") == info["group"]
            assert info["prototype"] in set(PROTOTYPES) | set(UNARY_PROTOTYPES)
        if info["family"] == "unary":
            assert info["group"][:-1] in UNARY_ELEMENTS and info["group"].endswith("1")
        elif info["family"] != "intermetallic":
            assert set(FAMILY_ANIONS[info["family"]]) & set(group)
        assert len(f) <= MAX_ATOMS
    surfaces = [f for f in frames if f.info["config_type"] == "surface"]
    assert all(f.pbc.tolist() == [True, True, False] for f in surfaces)
    assert all(not f.pbc.any() for f in frames if f.info["config_type"] in ("cluster", "compressed"))
    summary = summarize(frames, ELEMENTS)
    covered = set().union(*(f.get_chemical_symbols() for f in frames))
    assert summary["frames"] == len(frames) and summary["elements_missing"] == sorted(set(ELEMENTS) - covered)
    assert sum(summary["frames_by_family"].values()) == len(frames)
    assert summary["compositions_by_family"]["unary"] == len(UNARY_ELEMENTS)
    assert set(summary["frames_by_family"]) <= set(FAMILY_WEIGHTS) | {"unary"}
    assert summary["atoms_per_frame"]["max"] <= MAX_ATOMS


def test_no_two_atoms_closer_than_the_stated_fraction_except_compressed_pairs(frames):
    for f in frames:
        if f.info["config_type"] == "compressed":
            assert len(f) == 2
            r = f.get_distance(0, 1) / covalent_radii[f.numbers].sum()
            assert 0.6 - 1e-9 <= r <= 1.0 + 1e-9
            continue
        ratios = _pair_ratios(f)
        assert len(f) == 1 or ratios.min() >= MIN_CONTACT_FRACTION - 1e-9, (f.info["id"], ratios.min())


def test_same_seed_same_frames_and_more_extends_without_changing_the_first(frames):
    def key(fs):
        return [(f.info["id"], f.get_chemical_formula(), np.round(f.positions, 10).tobytes()) for f in fs]

    fewer = generate_chemistries(ELEMENTS, 6, seed=3, unaries=False, progress=False)
    assert key(fewer) == key(frames[: len(fewer)])
    counts = {"crystal": 1, "rattled": 2}
    one = generate_chemistries(ELEMENTS[:8], 3, counts=counts, seed=3, progress=False)
    more = generate_chemistries(ELEMENTS[:8], 3, counts={"crystal": 2, "rattled": 3}, seed=3, progress=False)
    by_id = {f.info["id"]: f for f in more}
    assert len(more) > len(one)
    assert all(np.array_equal(f.positions, by_id[f.info["id"]].positions) for f in one)
    other = generate_chemistries(ELEMENTS[:8], 3, counts=counts, seed=4, unaries=False, progress=False)
    assert key(other) != key(one[-len(other):])


def test_md_snapshots_with_a_calculator_share_the_composition():
    frames = generate_chemistries(["Cu", "Au", "Ag", "Ni"], 2, counts={"md": 1}, seed=0,
                                  md_calculator=EMT(), unaries=False, progress=False)
    assert len(frames) == 2 * 4  # compositions × one trajectory of 4 snapshots
    for f in frames:
        assert f.info["config_type"] == "md" and 300 <= f.info["temperature_K"] <= 2000
    first = frames[:4]
    assert len({f.info["id"] for f in first}) == 4 and len({f.info["group"] for f in first}) == 1
    assert not np.allclose(first[0].positions, first[-1].positions)


def test_bad_input_gets_one_line_errors(tmp_path, capsys):
    for elements, message in [(["Cu", "Xx"], "unknown element(s) Xx"), ([], "give at least one element"),
                              (["Cu", "Cu"], "elements repeat: Cu")]:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            generate_chemistries(elements, 1, progress=False)
    with pytest.raises(ValueError, match="no binary or ternary family can be made of He, Cu"):
        generate_chemistries(["He", "Cu"], 1, progress=False)
    assert len(generate_chemistries(["He", "Cu"], 0, counts={"crystal": 1}, progress=False)) == 8
    with pytest.raises(ValueError, match="unknown kind"):
        generate_chemistries(["Cu"], 0, counts={"liquid": 1}, progress=False)
    with pytest.raises(ValueError, match="md snapshots need a calculator"):
        generate_chemistries(["Cu"], 0, counts={"md": 1}, progress=False)
    code = main(["data", "chemistries", "--elements", "Cu", "Xx", "-o", str(tmp_path / "x.xyz")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["mlip: error: unknown element(s) Xx"]


def test_cli_writes_the_frames_and_prints_the_statistics(tmp_path, capsys):
    out = tmp_path / "chem.extxyz"
    argv = ["data", "chemistries", "--elements", "Na", "Mg", "Cl", "O", "--compositions", "3", "--count",
            "crystal=1", "--count", "surface=1", "--no-unaries", "-o", str(out), "--summary",
            str(tmp_path / "s.json"), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    frames = read(out, ":")
    assert len(frames) == 3 * 2
    assert f"wrote {len(frames)} structures" in printed and "families (compositions / frames)" in printed
    assert {f.info["config_type"] for f in frames} == {"crystal", "surface"}
    assert all({"group", "family", "prototype", "id"} <= set(f.info) for f in frames)
    assert all(isinstance(f.info["group"], str) for f in frames)
    assert main(argv[:3] + ["F", "Li", "-o", str(tmp_path / "f.xyz"), "--compositions", "0", "--count",
                            "crystal=1"]) == 0
    assert {f.info["group"] for f in read(tmp_path / "f.xyz", ":")} == {"F1", "Li1"}  # not False
    assert main(argv) == 2  # the file exists
    capsys.readouterr()
    assert main(argv[:-3] + ["--without", "surface", "-o", str(tmp_path / "w.xyz"), "--no-progress"]) == 0
    assert {f.info["config_type"] for f in read(tmp_path / "w.xyz", ":")} == {"crystal"}
