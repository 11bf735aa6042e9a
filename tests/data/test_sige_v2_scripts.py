"""The v2 Si–Ge scripts (examples/datasets/sige-pbe/v2/): the structures additions.py makes, and the value
order plan.py gives them. The MD of additions.py and GPAW are left out (minutes to hours)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ase.neighborlist import neighbor_list

from mlip.testing.scripts import script_module

V2 = Path(__file__).resolve().parents[2] / "examples" / "datasets" / "sige-pbe" / "v2"


def _load(name):
    path = V2 / name
    if not path.is_file():
        pytest.skip("examples/ is not beside the tests (installed tests)")
    return script_module(path)


@pytest.fixture(scope="module")
def additions():
    with _load("additions.py") as module:
        yield module


@pytest.fixture(scope="module")
def plan():
    with _load("plan.py") as module:
        yield module


def test_transition_path_runs_from_diamond_to_beta_tin(additions):
    frames = additions.transition_path_frames()
    assert len(frames) == 2 * additions.PATH_POINTS * 2
    assert len({a.info["id"] for a in frames}) == len(frames)
    for element in ("Si", "Ge"):
        path = [a for a in frames if a.get_chemical_symbols()[0] == element and a.info["volume_scale"] == 1.0]
        start, end = path[0], path[-1]
        cell = start.cell.lengths()
        assert cell[2] / cell[0] == pytest.approx(math.sqrt(2))
        # the start is the diamond crystal: four neighbours at the bond length a·√3/4
        i, d = neighbor_list("id", start, 1.1 * additions.A_PBE[element] * math.sqrt(3) / 4)
        assert np.bincount(i).tolist() == [4] * 4
        assert d == pytest.approx(additions.A_PBE[element] * math.sqrt(3) / 4)
        assert start.get_volume() / 4 == pytest.approx(additions.A_PBE[element] ** 3 / 8)
        end_cell = end.cell.lengths()
        assert end_cell[2] / end_cell[0] == pytest.approx(additions.BETA_TIN_C_OVER_A)
        assert end.get_volume() / start.get_volume() == pytest.approx(additions.BETA_TIN_VOLUME_RATIO)
        # β-Sn: six neighbours within 10 % of the nearest (four at d1, two at ≈ 1.05 d1)
        d_end = neighbor_list("d", end, 4.0)
        assert np.count_nonzero(d_end < 1.1 * d_end.min()) == 6 * 4
    # the two volumes of a path point share a group, so a split keeps them together
    assert frames[0].info["group"] == frames[1].info["group"] != frames[2].info["group"]


def test_zincblende_cell_orders_the_sublattices_and_alloys_keep_their_composition(additions):
    rng = np.random.default_rng(0)
    cell = additions.diamond_cell(4, True, rng)
    i, j = neighbor_list("ij", cell, 2.6)
    symbols = np.array(cell.get_chemical_symbols())
    assert len(i) == 4 * 8 and (symbols[i] != symbols[j]).all()  # every bond Si–Ge
    for n_si in (0, 2, 6, 8):
        atoms = additions.diamond_cell(n_si, False, rng)
        assert atoms.get_chemical_symbols().count("Si") == n_si
        a = (n_si / 8) * additions.A_PBE["Si"] + (1 - n_si / 8) * additions.A_PBE["Ge"]
        assert atoms.cell.lengths() == pytest.approx([a] * 3)  # Vegard


def test_value_order_takes_the_additions_in_turns(plan, additions):
    from ase.build import bulk

    def frame(kind, k):
        atoms = bulk("Si", "diamond", a=5.43, cubic=True)
        atoms.info = {"config_type": kind, "id": f"{kind}-{k:05d}"}
        return atoms

    structures = [frame(kind, k) for kind in plan.WEIGHTS for k in range(5)]
    order = plan.value_order(structures, first_ids=["amorphous-00003"])
    assert order[0].info["id"] == "amorphous-00003"
    kinds = [a.info["config_type"] for a in order[1:]]
    first_round = kinds[:sum(plan.WEIGHTS.values())]
    assert first_round.count("md_crystal") == plan.WEIGHTS["md_crystal"] == 3
    assert first_round.count("transition_path") == plan.WEIGHTS["transition_path"]
    assert sorted(a.info["id"] for a in order) == sorted(a.info["id"] for a in structures)
