"""mlip.data.structures: the structure generator behind reference datasets."""

from collections import Counter

import numpy as np
import pytest
from ase.calculators.emt import EMT
from ase.data import atomic_numbers, covalent_radii
from ase.neighborlist import neighbor_list

from mlip.data.structures import (ELEMENT_PROTOTYPES, KINDS, MAX_SIZE, MIN_DISTANCE_FRACTION, PAIR_PROTOTYPES,
                                  SMALL_SIZE, generate_structures, nearest_neighbor_distance, prototype_cell)

SMALL = {"prototype": 12, "ordered_alloy": 4, "random_alloy": 4, "strained": 4, "rattled": 6, "vacancy": 3,
         "interstitial": 3, "surface": 6, "cluster": 5, "compressed": 8, "liquid": 3, "amorphous": 3}


@pytest.fixture(scope="module")
def sige():
    return generate_structures(["Si", "Ge"], SMALL, seed=4, progress=False)


def _min_distance(atoms):
    d = neighbor_list("d", atoms, 6.0)
    return d.min() if len(d) else np.inf


def test_every_kind_is_made_with_its_metadata(sige):
    kinds = Counter(f.info["config_type"] for f in sige)
    assert kinds == {**SMALL, "isolated_atom": 2}
    ids = [f.info["id"] for f in sige]
    assert len(set(ids)) == len(ids)
    assert all(f.info["group"] and f.info["prototype"] for f in sige)
    assert set(f.info["config_type"] for f in sige) == set(KINDS) - {"md"}


def test_sizes_and_periodicity(sige):
    sizes = np.array([len(f) for f in sige])
    assert sizes.max() <= MAX_SIZE and (sizes <= SMALL_SIZE).mean() > 0.6
    for f in sige:
        kind = f.info["config_type"]
        if kind == "surface":
            assert f.pbc.tolist() == [True, True, False]
        elif kind in ("cluster", "compressed", "isolated_atom"):
            assert not f.pbc.any()
            if kind == "cluster":
                assert 2 <= len(f) <= 20
        else:
            assert f.pbc.all() and f.cell.rank == 3
    atoms = [f for f in sige if f.info["config_type"] == "isolated_atom"]
    assert sorted(a.get_chemical_symbols()[0] for a in atoms) == ["Ge", "Si"]
    assert all(np.allclose(a.cell.lengths(), 12.0) for a in atoms)


def test_no_overlapping_atoms_except_the_compressed_ones(sige):
    for f in sige:
        shortest = min(nearest_neighbor_distance(s) for s in f.get_chemical_symbols())
        d = _min_distance(f)
        if f.info["config_type"] == "compressed":
            (i, j), r = neighbor_list("ij", f, 6.0), neighbor_list("d", f, 6.0)
            pair = r.argmin()
            covalent = covalent_radii[f.numbers[i[pair]]] + covalent_radii[f.numbers[j[pair]]]
            assert 0.6 * covalent - 1e-9 <= d <= 1.1 * covalent
        else:
            assert d >= MIN_DISTANCE_FRACTION * shortest - 1e-9, f.info["id"]


def test_seeded_and_extensible():
    a = generate_structures(["Cu", "Au"], {"prototype": 3, "rattled": 2}, seed=1, progress=False)
    b = generate_structures(["Cu", "Au"], {"prototype": 5, "rattled": 2}, seed=1, progress=False)
    c = generate_structures(["Cu", "Au"], {"prototype": 3, "rattled": 2}, seed=2, progress=False)
    by_id = {f.info["id"]: f for f in b}
    for f in a:  # more frames of a kind leave the first ones as they were
        g = by_id[f.info["id"]]
        assert np.array_equal(f.positions, g.positions) and np.array_equal(f.cell.array, g.cell.array)
    assert any(not np.array_equal(f.positions, g.positions) for f, g in zip(a, c) if len(f) == len(g)) or \
        [len(f) for f in a] != [len(g) for g in c]


@pytest.mark.parametrize("name,neighbors", [("diamond", 4), ("fcc", 12), ("bcc", 8), ("sc", 6), ("hcp", 12),
                                            ("bc8", 4), ("zincblende", 4), ("wurtzite", 4), ("rocksalt", 6),
                                            ("cesium_chloride", 8), ("beta_tin", 4), ("simple_hexagonal", 2)])
def test_prototypes_have_their_coordination(name, neighbors):
    assert name in ELEMENT_PROTOTYPES + PAIR_PROTOTYPES
    atoms = prototype_cell(name, ["Si", "Ge"])
    i, d = neighbor_list("id", atoms, 7.0)
    shortest = d.min()
    counts = np.bincount(i[d < shortest * 1.05], minlength=len(atoms))
    assert (counts == neighbors).all(), (name, counts)
    if name in PAIR_PROTOTYPES:
        assert sorted(set(atoms.get_chemical_symbols())) == ["Ge", "Si"]


def test_nearest_neighbor_distances():
    assert nearest_neighbor_distance("Si") == pytest.approx(5.43 * 3**0.5 / 4, abs=0.01)  # diamond
    assert nearest_neighbor_distance("Cu") == pytest.approx(3.61 / 2**0.5, abs=0.01)  # fcc
    # no reference crystal in ASE: twice the covalent radius
    assert nearest_neighbor_distance("Rn") == pytest.approx(2 * covalent_radii[atomic_numbers["Rn"]])


def test_md_snapshots_with_a_calculator():
    frames = generate_structures(["Cu", "Au"], {"md": 2}, seed=0, md_calculator=EMT(),
                                 progress=False)
    md = [f for f in frames if f.info["config_type"] == "md"]
    assert len(md) == 8 and len({f.info["group"] for f in md}) == 2
    assert all(300 <= f.info["temperature_K"] <= 2000 for f in md)
    assert not np.array_equal(md[0].positions, md[1].positions)


def test_bad_requests_are_one_line_errors():
    with pytest.raises(ValueError, match="unknown element"):
        generate_structures(["Si", "Xx"], progress=False)
    with pytest.raises(ValueError, match="unknown kind"):
        generate_structures(["Si"], {"crystals": 3}, progress=False)
    with pytest.raises(ValueError, match="need a calculator"):
        generate_structures(["Si"], {"md": 1}, progress=False)
    with pytest.raises(ValueError, match="repeat"):
        generate_structures(["Si", "Si"], progress=False)


def test_split_by_kind_keeps_groups_together_and_every_kind_in_every_part(tmp_path, capsys):
    from ase.io import read, write

    from mlip.data.splits import split_dataset
    from mlip.testing.cli import run_cli

    frames = generate_structures(["Cu", "Au"], {"prototype": 20, "cluster": 10, "md": 5}, seed=0,
                                 md_calculator=EMT(), progress=False)
    train, valid, test = split_dataset(frames, (0.6, 0.2, 0.2), seed=1, group_by="group",
                                       stratify_by="config_type")
    assert sorted(f.info["id"] for f in train + valid + test) == sorted(f.info["id"] for f in frames)
    for kind in ("prototype", "cluster", "md"):
        sizes = [sum(f.info["config_type"] == kind for f in part) for part in (train, valid, test)]
        assert all(n > 0 for n in sizes), (kind, sizes)
    for part, other in ((train, valid + test), (valid, train + test)):  # no MD trajectory straddles two parts
        assert not {f.info["group"] for f in part} & {f.info["group"] for f in other}
    path = tmp_path / "set.xyz"
    write(path, frames)
    code, out, err = run_cli(capsys, "data", "split", path, "--fractions", "0.6", "0.2", "0.2", "--seed", "1")
    assert code == 0, err
    written = [read(tmp_path / f"set-{p}.xyz", ":") for p in ("train", "valid", "test")]
    expected = [[f.info["id"] for f in p] for p in (train, valid, test)]
    assert [[f.info["id"] for f in w] for w in written] == expected
    code, out, err = run_cli(capsys, "data", "split", path)
    assert code == 2 and "--overwrite" in err


def test_cli_without_leaves_a_kind_out_of_the_counts_or_the_defaults(tmp_path, capsys):
    """``--without KIND``: the kind gets none, of ``--count`` or of the defaults (the CLI's reading of it,
    :func:`mlip.cli.arguments.kind_counts`); the other kinds are as they would be."""
    import argparse

    from ase.io import read

    from mlip.cli import main
    from mlip.cli.arguments import kind_counts

    out = tmp_path / "s.xyz"
    assert main(["data", "structures", "Si", "-o", str(out), "--count", "prototype=2",
                 "--count", "compressed=2", "--without", "compressed", "--no-progress"]) == 0
    assert Counter(a.info["config_type"] for a in read(out, ":")) == {"prototype": 2, "isolated_atom": 1}
    defaults = {"prototype": 5, "compressed": 3}
    namespace = argparse.Namespace
    without = namespace(count=None, without=["compressed"])
    assert kind_counts(without, defaults) == {"prototype": 5, "compressed": 0}
    assert kind_counts(namespace(count=[("prototype", 1)], without=[]), defaults) == {"prototype": 1}
    assert kind_counts(namespace(count=None, without=[]), defaults) is None
    with pytest.raises(SystemExit):
        main(["data", "structures", "Si", "-o", str(tmp_path / "t.xyz"), "--without", "compresed"])
    assert "invalid choice: 'compresed'" in capsys.readouterr().err
