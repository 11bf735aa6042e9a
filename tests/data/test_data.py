"""Data layer: readers (extxyz, ASE db, MPtrj JSON), label checks, splits and the EMT generator.

Reference labels come from ASE's EMT evaluated here, never from mlip.data itself. Tolerances:
* 1e-12: values that travel as binary (ASE db) or as Python ``repr`` text (extxyz energy, stress and cell,
  JSON floats), which round-trips doubles exactly.
* 1e-8: positions and forces in extxyz, which ASE writes with 8 decimals (error ≤ 5e-9).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import re

import numpy as np
import pytest
from ase import Atoms, units
from ase.build import bulk, fcc111
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator

import ase.db
import ase.io
from mlip.data import Sample, read_dataset, split_dataset, write_extxyz
from mlip.cli.data_emt import main
from mlip.data.emt import (CATEGORIES, DEFAULT_COUNTS, ELEMENTS, EMT_FCC_LATTICE, generate_emt_dataset,
                           resolve_counts)
from mlip.data.splits import split_indices

EXACT = 1e-12
XYZ_DECIMALS = 1e-8


# ---------------------------------------------------------------------------------------- helpers
def emt_structures():
    """EMT-labelled structures: rattled bulk, compressed sheared alloy, slab, cluster (no stress)."""
    cu = bulk("Cu", "fcc", a=3.6, cubic=True) * (2, 1, 1)
    cu.rattle(0.05, seed=1)
    cuau = bulk("Cu", "fcc", a=3.7, cubic=True) * (1, 1, 2)
    cuau.numbers[::3] = 79
    cuau.set_cell(cuau.cell.array @ np.array([[0.96, 0.02, 0.0], [0.02, 0.97, 0.01], [0.0, 0.01, 0.95]]),
                  scale_atoms=True)
    cuau.rattle(0.03, seed=2)
    slab = fcc111("Pt", size=(2, 2, 3), vacuum=6.0, a=3.92)
    slab.pbc = [True, True, False]
    slab.info.pop("adsorbate_info", None)
    slab.rattle(0.04, seed=3)
    cluster = Atoms("Ag3Ni", positions=[[0, 0, 0], [2.8, 0, 0], [1.4, 2.4, 0], [1.4, 0.8, 2.2]])
    out = []
    for k, atoms in enumerate((cu, cuau, slab, cluster)):
        atoms.calc = EMT()
        atoms.get_potential_energy()
        atoms.get_forces()
        if atoms.cell.rank == 3:
            atoms.get_stress()
        atoms.info["group"] = f"g{k // 2}"
        out.append(atoms)
    return out


def emt_labels(atoms):
    """Fresh EMT energy, forces and Voigt stress (None without a 3-D cell) of a copy of ``atoms``."""
    a = atoms.copy()
    a.calc = EMT()
    stress = a.get_stress() if a.cell.rank == 3 else None
    return a.get_potential_energy(), a.get_forces(), stress


def assert_error_names(exc_info, path, frame, *ids):
    msg = str(exc_info.value)
    assert str(path) in msg, msg
    assert f"frame {frame}" in msg, msg
    for i in ids:
        assert str(i) in msg, msg


# --------------------------------------------------------------------------------- extxyz and db
def test_extxyz_round_trip(tmp_path):
    frames = emt_structures()
    path = tmp_path / "emt.xyz"
    ase.io.write(path, frames, format="extxyz")
    samples = read_dataset(path)
    ase_frames = ase.io.read(path, index=":")
    assert len(samples) == len(frames)
    for k, (s, ref, back) in enumerate(zip(samples, frames, ase_frames)):
        assert isinstance(s, Sample) and s.index == k and s.source == str(path)
        assert s.group == ref.info["group"]
        # Identical to what ASE's own reader returns ...
        assert s.energy == pytest.approx(back.get_potential_energy(), abs=EXACT)
        np.testing.assert_allclose(s.forces, back.get_forces(), atol=EXACT, rtol=0)
        # ... and to the EMT labels that were written (energy and stress exact, forces to 8 decimals).
        assert s.energy == pytest.approx(ref.get_potential_energy(), abs=EXACT)
        np.testing.assert_allclose(s.forces, ref.get_forces(), atol=XYZ_DECIMALS, rtol=0)
        np.testing.assert_allclose(s.atoms.positions, ref.positions, atol=XYZ_DECIMALS, rtol=0)
        np.testing.assert_array_equal(s.atoms.pbc, ref.pbc)
        assert s.forces.shape == (len(ref), 3)
        if ref.cell.rank == 3:
            assert s.stress.shape == (6,)
            np.testing.assert_allclose(s.stress, ref.get_stress(), atol=EXACT, rtol=0)
        else:
            assert s.stress is None
        assert s.atoms.calc is None
    # Samples written back out read the same.
    again = read_dataset(write_extxyz(samples, tmp_path / "again.xyz"))
    for a, b in zip(samples, again):
        assert a.energy == b.energy and a.group == b.group
        np.testing.assert_allclose(a.forces, b.forces, atol=XYZ_DECIMALS, rtol=0)
        assert (a.stress is None) == (b.stress is None)


def test_streaming_extxyz_and_gzip(tmp_path):
    frames = emt_structures()
    path = tmp_path / "emt.xyz.gz"
    with gzip.open(path, "wt") as fh:
        ase.io.write(fh, frames, format="extxyz")
    gen = read_dataset(path, stream=True)
    assert not isinstance(gen, list)
    first = next(gen)
    assert first.energy == pytest.approx(frames[0].get_potential_energy(), abs=EXACT)
    assert len(list(gen)) == len(frames) - 1


def test_ase_db_round_trip(tmp_path):
    frames = emt_structures()
    path = tmp_path / "emt.db"
    with ase.db.connect(path) as db:
        for atoms in frames:
            db.write(atoms, group=atoms.info["group"])
    samples = read_dataset(path)
    assert len(samples) == len(frames)
    for s, ref in zip(samples, frames):
        assert s.energy == pytest.approx(ref.get_potential_energy(), abs=EXACT)
        np.testing.assert_allclose(s.forces, ref.get_forces(), atol=EXACT, rtol=0)
        np.testing.assert_allclose(s.atoms.positions, ref.positions, atol=EXACT, rtol=0)
        assert s.group == ref.info["group"] and s.frame_id.startswith("id=")
        if ref.cell.rank == 3:
            np.testing.assert_allclose(s.stress, ref.get_stress(), atol=EXACT, rtol=0)
        else:
            assert s.stress is None


def test_ref_prefix_and_custom_keys(tmp_path):
    frames = emt_structures()
    ref_frames, custom_frames = [], []
    for atoms in frames:
        e, f, s = atoms.get_potential_energy(), atoms.get_forces(), atoms.calc.results.get("stress")
        a = atoms.copy()
        a.info["REF_energy"] = e
        a.arrays["REF_forces"] = f.copy()
        if s is not None:
            a.info["REF_stress"] = s.copy()
        ref_frames.append(a)
        b = atoms.copy()
        b.info["dft_energy"] = e
        b.arrays["dft_forces"] = f.copy()
        if s is not None:
            b.info["dft_stress"] = s.copy()
        custom_frames.append(b)
    ref_path, custom_path = tmp_path / "ref.xyz", tmp_path / "custom.xyz"
    ase.io.write(ref_path, ref_frames, format="extxyz")
    ase.io.write(custom_path, custom_frames, format="extxyz")
    for samples in (read_dataset(ref_path),
                    read_dataset(custom_path, energy_key="dft_energy", forces_key="dft_forces",
                                 stress_key="dft_stress")):
        for s, ref in zip(samples, frames):
            assert s.energy == pytest.approx(ref.get_potential_energy(), abs=EXACT)
            np.testing.assert_allclose(s.forces, ref.get_forces(), atol=XYZ_DECIMALS, rtol=0)
            if ref.cell.rank == 3:
                np.testing.assert_allclose(s.stress, ref.get_stress(), atol=EXACT, rtol=0)
            else:
                assert s.stress is None
            # The label keys are consumed, other metadata stays.
            assert not {"REF_energy", "dft_energy"} & set(s.atoms.info) and "group" in s.atoms.info
    # An explicit key is used as given: no fallback to other names.
    with pytest.raises(ValueError, match="dft_energy"):
        read_dataset(ref_path, energy_key="dft_energy")
    # The standard key wins over REF_ when both are present.
    both = frames[0].copy()
    both.calc = SinglePointCalculator(both, energy=1.5, forces=np.zeros((len(both), 3)))
    both.info["REF_energy"] = 2.5
    both.arrays["REF_forces"] = np.ones((len(both), 3))
    ase.io.write(tmp_path / "both.xyz", [both], format="extxyz")
    (s,) = read_dataset(tmp_path / "both.xyz", read_stress=False)
    assert s.energy == 1.5 and np.all(s.forces == 0.0)
    # ASE db: REF_ energy as a key-value pair, REF_ arrays in the row's data.
    with ase.db.connect(tmp_path / "ref.db") as db:
        for atoms in frames:
            data = {"REF_forces": atoms.get_forces()}
            if "stress" in atoms.calc.results:
                data["REF_stress"] = atoms.get_stress()
            db.write(Atoms(atoms.numbers, atoms.positions, cell=atoms.cell, pbc=atoms.pbc),
                     REF_energy=atoms.get_potential_energy(), data=data)
    for s, ref in zip(read_dataset(tmp_path / "ref.db"), frames):
        assert s.energy == pytest.approx(ref.get_potential_energy(), abs=EXACT)
        np.testing.assert_allclose(s.forces, ref.get_forces(), atol=EXACT, rtol=0)
        assert (s.stress is None) == (ref.cell.rank != 3)


def test_stress_formats_agree(tmp_path):
    atoms = emt_structures()[1]
    voigt = atoms.get_stress()
    full = atoms.get_stress(voigt=False)
    assert np.abs(voigt[3:]).max() > 1e-4  # the sheared cell has shear stress: order matters
    a = atoms.copy()
    a.info["s6"] = voigt
    a.info["s33"] = full  # written as a nested list (JSON)
    a.info["s9"] = full.reshape(9)
    a.arrays["F"] = atoms.get_forces()
    a.info["E"] = atoms.get_potential_energy()
    ase.io.write(tmp_path / "s.xyz", [a], format="extxyz")
    ase.io.write(tmp_path / "ase.xyz", [atoms], format="extxyz")  # ASE writes stress as 9 values (3×3)
    results = [read_dataset(tmp_path / "s.xyz", energy_key="E", forces_key="F", stress_key=k)[0].stress
               for k in ("s6", "s33", "s9")]
    results.append(read_dataset(tmp_path / "ase.xyz")[0].stress)
    # A Voigt-6 value under the standard key (which ASE's own parser refuses) is accepted too.
    text = (tmp_path / "ase.xyz").read_text()
    six = "stress=\"" + " ".join(repr(float(x)) for x in voigt) + "\""
    (tmp_path / "six.xyz").write_text(re.sub(r'stress="[^"]*"', six, text, count=1))
    results.append(read_dataset(tmp_path / "six.xyz")[0].stress)
    for r in results:
        np.testing.assert_allclose(r, voigt, atol=EXACT, rtol=0)
    assert read_dataset(tmp_path / "ase.xyz", read_stress=False)[0].stress is None


# ------------------------------------------------------------------------------------------ MPtrj
def to_mptrj_frame(atoms, mp_id, use_abc=False):
    """Our own tiny writer of the MPtrj layout (pymatgen Structure dict, VASP stress in kbar)."""
    stress_ase = atoms.get_stress(voigt=False)  # eV/Å³, ASE sign
    kbar = -stress_ase / units.GPa * 10.0  # VASP: kbar, positive = compressive
    sites = []
    for sym, xyz, abc in zip(atoms.get_chemical_symbols(), atoms.positions, atoms.get_scaled_positions(wrap=False)):
        site = {"species": [{"element": sym, "occu": 1}], "abc": abc.tolist(), "label": sym,
                "properties": {"magmom": 0.0}}
        if not use_abc:
            site["xyz"] = xyz.tolist()
        sites.append(site)
    energy = atoms.get_potential_energy()
    structure = {"@module": "pymatgen.core.structure", "@class": "Structure", "charge": 0,
                 "lattice": {"matrix": atoms.cell.array.tolist(), "pbc": [True, True, True]},
                 "properties": {}, "sites": sites}
    return {"structure": structure, "uncorrected_total_energy": energy,
            "corrected_total_energy": energy - 0.25 * len(atoms), "energy_per_atom": energy / len(atoms),
            "force": atoms.get_forces().tolist(), "stress": kbar.tolist(), "magmom": None, "mp_id": mp_id,
            "bandgap": 0.0}


def mptrj_atoms(n=3, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        atoms = bulk("Cu", "fcc", a=3.59 * (0.96 if k == 0 else 1.0 + 0.01 * k), cubic=True)
        if k > 0:
            atoms.numbers[k % 4] = 79
            atoms.positions += rng.normal(0, 0.04, atoms.positions.shape)
        atoms.calc = EMT()
        out.append(atoms)
    return out


def mptrj_layout(frames):
    """Two mp_ids: the first with frames 0 and 1, the second with the rest."""
    doc = {}
    for k, atoms in enumerate(frames):
        mp_id = "mp-30" if k < 2 else "mp-81"
        doc.setdefault(mp_id, {})[f"{mp_id}-{k}-0"] = to_mptrj_frame(atoms, mp_id, use_abc=(k == 1))
    return doc


def test_mptrj_energies_forces_stress_sign(tmp_path):
    frames = mptrj_atoms(3)
    # Independent sign check: frame 0 is compressed (a = 0.96 a0), so EMT's ASE stress diagonal is
    # negative, and VASP's (kbar, positive = compressive) is positive.
    assert np.all(frames[0].get_stress()[:3] < 0)
    doc = mptrj_layout(frames)
    assert np.all(np.diag(doc["mp-30"]["mp-30-0-0"]["stress"]) > 0)
    path = tmp_path / "mptrj.json"
    path.write_text(json.dumps(doc))
    gz = tmp_path / "mptrj.json.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(json.dumps(doc))
    for p in (path, gz):
        samples = read_dataset(p)
        assert [s.group for s in samples] == ["mp-30", "mp-30", "mp-81"]
        assert [s.frame_id for s in samples] == ["mp-30-0-0", "mp-30-1-0", "mp-81-2-0"]
        for s, ref in zip(samples, frames):
            assert s.energy == pytest.approx(ref.get_potential_energy(), abs=EXACT)  # uncorrected by default
            np.testing.assert_allclose(s.forces, ref.get_forces(), atol=EXACT, rtol=0)
            np.testing.assert_allclose(s.atoms.positions, ref.positions, atol=1e-10, rtol=0)  # abc @ cell
            np.testing.assert_allclose(s.atoms.cell.array, ref.cell.array, atol=EXACT, rtol=0)
            # kbar → ASE eV/Å³ with ASE's sign: equal to EMT's own stress (relative 1e-12: two scalings).
            np.testing.assert_allclose(s.stress, ref.get_stress(), rtol=1e-12, atol=1e-15)
            assert s.atoms.info["mp_id"] == s.group
        assert np.all(samples[0].stress[:3] < 0)
    corrected = read_dataset(path, energy_key="corrected_total_energy")
    for s, ref in zip(corrected, frames):
        assert s.energy == pytest.approx(ref.get_potential_energy() - 0.25 * len(ref), abs=EXACT)


class LimitedReader:
    """A text file object that fails if more than ``limit`` characters are read from it."""

    def __init__(self, text, limit):
        self._f = io.StringIO(text)
        self.limit = limit
        self.consumed = 0

    def read(self, n=-1):
        data = self._f.read(n)
        self.consumed += len(data)
        if self.consumed > self.limit:
            raise AssertionError(f"read {self.consumed} characters, beyond {self.limit}: not streaming")
        return data


def test_mptrj_is_streamed_and_chunk_boundaries_do_not_matter():
    base = mptrj_atoms(4, seed=1)
    doc = {}
    for k in range(60):  # 60 frames, ~3 kB each, in 12 mp_ids
        mp_id = f"mp-{k // 5}"
        doc.setdefault(mp_id, {})[f"{mp_id}-{k}"] = to_mptrj_frame(base[k % 4], mp_id, use_abc=(k % 3 == 0))
    text = json.dumps(doc, indent=1)
    first_len = len(json.dumps(doc["mp-0"]["mp-0-0"], indent=1))
    assert len(text) > 40 * first_len
    # The first frame comes out after reading a small part of the file: a quarter at most, when the
    # whole document is 60 frames (the reader grows its reads geometrically while a frame is incomplete).
    reader = read_dataset(LimitedReader(text, len(text) // 4), format="mptrj", stream=True, chunk_size=512)
    first = next(reader)
    assert first.frame_id == "mp-0-0" and first.energy == pytest.approx(base[0].get_potential_energy(), abs=EXACT)
    # Reading everything through tiny chunks (boundaries inside numbers, strings, literals) gives exactly
    # what the default chunk size gives.
    tiny = read_dataset(io.StringIO(text), format="mptrj", chunk_size=7)
    whole = read_dataset(io.StringIO(text), format="mptrj")
    assert len(tiny) == len(whole) == 60
    for a, b in zip(tiny, whole):
        assert a.frame_id == b.frame_id and a.group == b.group and a.energy == b.energy
        np.testing.assert_array_equal(a.forces, b.forces)
        np.testing.assert_array_equal(a.stress, b.stress)
        np.testing.assert_array_equal(a.atoms.positions, b.atoms.positions)


# ------------------------------------------------------------------------------------ malformed
def _mptrj_text_with(change):
    doc = mptrj_layout(mptrj_atoms(3))
    frame = doc["mp-30"]["mp-30-1-0"]  # frame index 1
    change(frame)
    return json.dumps(doc)


MPTRJ_BREAKAGES = {
    "missing energy": (lambda f: f.pop("uncorrected_total_energy"), "uncorrected_total_energy"),
    "nan energy": (lambda f: f.__setitem__("uncorrected_total_energy", float("nan")), "not finite"),
    "inf force": (lambda f: f["force"][0].__setitem__(0, float("inf")), "NaN or inf"),
    "forces wrong shape": (lambda f: f.__setitem__("force", f["force"][:-1]), "shape"),
    "stress wrong size": (lambda f: f.__setitem__("stress", [1.0, 2.0, 3.0, 4.0]), "stress"),
    "unknown element": (lambda f: f["structure"]["sites"][0]["species"][0].__setitem__("element", "Xx"),
                        "unknown element"),
    "nan coordinate": (lambda f: f["structure"]["sites"][2].__setitem__("xyz", [0.0, float("nan"), 1.0]),
                       "NaN"),
    "zero volume": (lambda f: f["structure"]["lattice"].__setitem__("matrix", [[3.6, 0, 0], [3.6, 0, 0],
                                                                               [0, 0, 3.6]]), "volume"),
}


@pytest.mark.parametrize("case", sorted(MPTRJ_BREAKAGES))
def test_mptrj_malformed_frames_are_named(tmp_path, case):
    change, words = MPTRJ_BREAKAGES[case]
    path = tmp_path / "bad.json"
    path.write_text(_mptrj_text_with(change))
    with pytest.raises(ValueError, match=words) as exc:
        read_dataset(path)
    assert_error_names(exc, path, 1, "mp-30", "mp-30-1-0")


def test_mptrj_truncated_and_not_json(tmp_path):
    text = json.dumps(mptrj_layout(mptrj_atoms(3)))
    path = tmp_path / "cut.json"
    path.write_text(text[: text.index('"mp-30-1-0"') + 200])  # cut inside frame 1
    gen = read_dataset(path, stream=True)
    assert next(gen).frame_id == "mp-30-0-0"  # frames before the cut are fine
    with pytest.raises(ValueError, match="truncated or malformed") as exc:
        next(gen)
    assert_error_names(exc, path, 1, "mp-30", "mp-30-1-0")
    bad = tmp_path / "syntax.json"
    bad.write_text(text.replace('"force"', '"force" 1', 1))
    with pytest.raises(ValueError, match="malformed") as exc:
        read_dataset(bad)
    assert_error_names(exc, bad, 0)


def _xyz_with_bad_second_frame(tmp_path, kind):
    frames = emt_structures()[:3]
    good, bad = frames[0], frames[1].copy()
    e, f, s = frames[1].get_potential_energy(), frames[1].get_forces(), frames[1].get_stress()
    if kind == "missing energy":
        bad.calc = SinglePointCalculator(bad, forces=f, stress=s)
    elif kind == "nan energy":
        bad.calc = SinglePointCalculator(bad, energy=float("nan"), forces=f, stress=s)
    elif kind == "forces wrong shape":
        bad.info["REF_energy"] = e
        bad.arrays["REF_forces"] = f[:, :2].copy()
    elif kind == "nan coordinate":
        bad.positions[1, 2] = np.nan
        bad.calc = SinglePointCalculator(bad, energy=e, forces=f)
    elif kind == "zero volume":
        bad.cell = np.zeros((3, 3))
        bad.calc = SinglePointCalculator(bad, energy=e, forces=f)
    else:
        bad.calc = SinglePointCalculator(bad, energy=e, forces=f, stress=s)
    path = tmp_path / f"{kind.replace(' ', '_')}.xyz"
    ase.io.write(path, [good, bad, frames[2]], format="extxyz")
    if kind == "unknown element":
        lines = path.read_text().splitlines(keepends=True)
        second = 2 + len(good) + 2  # header + comment + atoms of frame 0, then frame 1's header/comment
        lines[second] = "Xx" + lines[second][2:]
        path.write_text("".join(lines))
    if kind == "truncated":
        text = path.read_text()
        path.write_text("".join(text.splitlines(keepends=True)[: 2 + len(good) + 2 + 3]))
    return path


@pytest.mark.parametrize("kind,words", [
    ("missing energy", "no energy label"),
    ("nan energy", "not finite"),
    ("forces wrong shape", r"shape \[\d+, 2\]"),
    ("nan coordinate", "NaN"),
    ("zero volume", "zero volume"),
    ("unknown element", "Xx"),
    ("truncated", "truncated"),
])
def test_extxyz_malformed_frames_are_named(tmp_path, kind, words):
    path = _xyz_with_bad_second_frame(tmp_path, kind)
    with pytest.raises(ValueError, match=words) as exc:
        read_dataset(path)
    assert_error_names(exc, path, 1)


def test_db_missing_forces_and_species_filter(tmp_path):
    frames = emt_structures()
    path = tmp_path / "bad.db"
    with ase.db.connect(path) as db:
        db.write(frames[0])
        db.write(Atoms(frames[1].numbers, frames[1].positions, cell=frames[1].cell, pbc=True), REF_energy=1.0)
    with pytest.raises(ValueError, match="no forces label") as exc:
        read_dataset(path)
    assert_error_names(exc, path, 1, "id=2")
    # Elements outside `species` are rejected with the frame named.
    good = tmp_path / "good.xyz"
    ase.io.write(good, frames, format="extxyz")
    with pytest.raises(ValueError, match="Au.*not among the allowed species") as exc:
        read_dataset(good, species=["Cu", "Pt", "Ag", "Ni"])
    assert_error_names(exc, good, 1)
    assert len(read_dataset(good, species=["Cu", "Au", "Pt", "Ag", "Ni"])) == len(frames)
    with pytest.raises(FileNotFoundError):
        read_dataset(tmp_path / "missing.db")
    with pytest.raises(ValueError, match="format"):
        read_dataset(tmp_path / "data.cif")


# ---------------------------------------------------------------------------------------- splits
def test_splits_disjoint_complete_deterministic():
    n = 103
    parts = split_dataset(n, (0.8, 0.1, 0.1), seed=0)
    joined = np.concatenate(parts)
    assert len(joined) == n and set(joined.tolist()) == set(range(n))  # disjoint and complete
    for p, f in zip(parts, (0.8, 0.1, 0.1)):
        assert abs(len(p) - f * n) <= 1
    again = split_dataset(n, (0.8, 0.1, 0.1), seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    other = split_dataset(n, (0.8, 0.1, 0.1), seed=1)
    assert not np.array_equal(parts[2], other[2])
    items = [f"x{i}" for i in range(n)]
    train, val, test = split_dataset(items, seed=0)
    assert [items.index(x) for x in test] == parts[2].tolist()
    two = split_dataset(10, (0.7, 0.3), seed=5)
    assert len(two) == 2 and len(two[0]) == 7
    for bad in ((0.5, 0.4), (1.2, -0.2), ()):
        with pytest.raises(ValueError):
            split_dataset(10, bad)


def test_grouped_splits_keep_groups_together():
    groups = [f"traj{i // 7}" for i in range(200)] + [f"single{i}" for i in range(40)]
    n = len(groups)
    parts = split_indices(n, (0.8, 0.1, 0.1), seed=3, groups=groups)
    joined = np.concatenate(parts)
    assert len(joined) == n and set(joined.tolist()) == set(range(n))
    owner = {}
    for k, p in enumerate(parts):
        for i in p:
            assert owner.setdefault(groups[i], k) == k, f"group {groups[i]} straddles two splits"
    for p, f in zip(parts, (0.8, 0.1, 0.1)):
        assert abs(len(p) - f * n) <= 7  # within one group (the largest has 7 frames)
    assert all(np.array_equal(a, b) for a, b in zip(parts, split_indices(n, (0.8, 0.1, 0.1), 3, groups)))
    # On samples: by Sample.group; samples without a group are their own group.
    samples = [Sample(Atoms("Cu"), 0.0, np.zeros((1, 3)), group=(None if i % 4 == 0 else f"m{i // 8}"),
                      index=i) for i in range(80)]
    train, val, test = split_dataset(samples, (0.6, 0.2, 0.2), seed=0, group_by="group")
    assert sorted(s.index for s in train + val + test) == list(range(80))
    for part in (train, val, test):
        others = [s for p in (train, val, test) if p is not part for s in p]
        assert not ({s.group for s in part if s.group} & {s.group for s in others if s.group})


# -------------------------------------------------------------------------------- EMT generator
@pytest.fixture(scope="module")
def small_emt(tmp_path_factory):
    d = tmp_path_factory.mktemp("emt")
    generate_emt_dataset(small=True, seed=0, out_path=d / "a.xyz", progress=False)
    generate_emt_dataset(small=True, seed=0, out_path=d / "b.xyz", progress=False)
    generate_emt_dataset(small=True, seed=1, out_path=d / "c.xyz", progress=False)
    return d


def test_generator_is_reproducible(small_emt):
    a, b, c = ((small_emt / n).read_bytes() for n in ("a.xyz", "b.xyz", "c.xyz"))
    assert a == b
    assert a != c


def test_generator_content(small_emt):
    samples = read_dataset(small_emt / "a.xyz")  # the reader itself checks finiteness and shapes
    types = {s.atoms.info["config_type"] for s in samples}
    assert types == set(CATEGORIES)
    for s in samples:
        a = s.atoms
        assert set(a.get_chemical_symbols()) <= set(ELEMENTS)
        assert a.info["elements"] == "-".join(sorted(set(a.get_chemical_symbols())))
        assert s.group and s.group == a.info["group"]
        assert math.isfinite(s.energy) and np.all(np.isfinite(s.forces))
        if a.pbc.any():
            assert 4 <= len(a) <= 64
            assert a.cell.rank == 3 and s.stress is not None and np.all(np.isfinite(s.stress))
        if a.info["config_type"] == "compressed":  # checked by test_generator_compressed_pairs_...
            assert a.info["prototype"] in ("dimer", "trimer", "fcc-pair")
            continue
        if a.info["config_type"] == "cluster":
            assert not a.pbc.any() and np.all(a.cell.array == 0) and s.stress is None
        elif a.info["config_type"] == "surface":
            assert a.pbc.tolist() == [True, True, False]
            z = a.positions[:, 2]
            assert a.cell[2, 2] - (z.max() - z.min()) > 9.0  # ≥ 2 × 5 Å of vacuum, minus rattle (σ ≤ 0.1 Å)
        else:
            assert a.pbc.all()
        # outside the compressed category no two atoms closer than 1.8 Å (periodic images included)
        from ase.neighborlist import neighbor_list

        if len(a) > 1 or a.pbc.any():
            probe = a.copy()
            if not a.pbc.any():
                probe.cell = np.ptp(a.positions, axis=0) + 10.0
            assert len(neighbor_list("i", probe, 1.8)) == 0
    md = [s for s in samples if s.atoms.info["config_type"] == "md"]
    assert len(md) >= 2 and len({s.group for s in md}) < len(md)  # trajectory frames share a group
    parts = split_dataset(samples, (0.5, 0.25, 0.25), seed=0, group_by="group")
    for part in parts:
        inside = {s.group for s in part}
        assert all(s.group not in inside for p in parts if p is not part for s in p)


def test_generator_labels_are_emt_and_physical(small_emt):
    samples = read_dataset(small_emt / "a.xyz")
    for s in samples:
        e, f, stress = emt_labels(s.atoms)
        # The file holds exactly the positions that were labelled and the energy/stress in full precision.
        assert s.energy == pytest.approx(e, abs=1e-9)
        np.testing.assert_allclose(s.forces, f, atol=XYZ_DECIMALS, rtol=0)
        if stress is not None:
            np.testing.assert_allclose(s.stress, stress, atol=1e-10, rtol=0)
    ideal = [s for s in samples if s.atoms.info["config_type"] in ("crystal", "ordered_alloy")
             and s.atoms.info["rattle"] == 0.0 and s.atoms.info["strain"] == 0.0]
    rattled = [s for s in samples if s.atoms.pbc.any() and s.atoms.info["rattle"] >= 0.03]
    assert len(ideal) >= 2 and len(rattled) >= 5
    for s in ideal:  # forces vanish by symmetry; positions rounded to ≤ 5e-9 Å times force constants of
        # ≲ 100 eV/Å² leave ≲ 1e-6 eV/Å (seen: ≤ 1.5e-7), far below the ≥ 0.05 eV/Å of rattled cells
        assert np.abs(s.forces).max() < 1e-5, s.atoms.info
    for s in rattled:
        assert np.abs(s.forces).max() > 0.05, s.atoms.info
    # EMT_FCC_LATTICE is EMT's equilibrium: near-zero stress, compression/tension on either side.
    for el, a0 in EMT_FCC_LATTICE.items():
        stresses = []
        for a in (0.99 * a0, a0, 1.01 * a0):
            atoms = bulk(el, "fcc", a=a)
            atoms.calc = EMT()
            stresses.append(atoms.get_stress()[0])
        assert stresses[0] < -1e-3 and abs(stresses[1]) < 1e-4 and stresses[2] > 1e-3, (el, stresses)


def test_generator_clusters_include_isolated_atoms_of_every_element():
    frames = generate_emt_dataset({"cluster": 28}, seed=2, progress=False)
    atoms = [a for a in frames if len(a) == 1]
    assert sorted(a.get_chemical_symbols()[0] for a in atoms) == sorted(ELEMENTS)
    kinds = {a.info["prototype"] for a in frames}
    assert "dimer" in kinds and any(k.startswith("compact") for k in kinds) and len(kinds) >= 5
    for a in frames:
        assert "stress" not in a.calc.results


def test_generator_compressed_pairs_reach_into_the_repulsive_wall():
    """The compressed category pushes one pair (atoms 0 and 1) between 0.45 × the covalent-radius sum
    and the shortest distance the other categories allow, in dimers, trimers and fcc cells."""
    from ase.data import covalent_radii

    from mlip.data.emt import MIN_DISTANCE

    frames = generate_emt_dataset({"compressed": 30}, seed=3, progress=False)
    assert {a.info["prototype"] for a in frames} == {"dimer", "trimer", "fcc-pair"}
    fractions = []
    for a in frames:
        assert a.info["config_type"] == "compressed"
        za, zb = a.numbers[:2]
        bond = covalent_radii[za] + covalent_radii[zb]
        d = a.get_distance(0, 1, mic=bool(a.pbc.any()))
        distances = a.get_all_distances(mic=bool(a.pbc.any()))[np.triu_indices(len(a), 1)]
        assert d == pytest.approx(distances.min(), abs=1e-6)  # the compressed pair is the shortest
        assert 0.45 * bond - 1e-6 <= d < max(MIN_DISTANCE, 0.75 * 2.9)
        fractions.append(d / bond)
        assert a.get_potential_energy() > 0 and np.all(np.isfinite(a.get_forces()))
        assert (a.cell.rank == 3) == ("stress" in a.calc.results)
    assert min(fractions) < 0.5 < max(fractions)


def test_generator_counts_and_cli(tmp_path, capsys):
    from mlip.data.summary import main as summary_main

    assert 2000 <= sum(DEFAULT_COUNTS.values()) <= 4000
    counts = resolve_counts(1000)
    assert sum(counts.values()) == 1000 and set(counts) == set(CATEGORIES)
    assert resolve_counts({"md": 3}) == {c: (3 if c == "md" else 0) for c in CATEGORIES}
    with pytest.raises(ValueError, match="unknown categories"):
        resolve_counts({"liquid": 3})
    out = tmp_path / "cli.xyz"
    assert main([str(out), "--count", "crystal=2", "--count", "surface=1", "--seed", "4", "--no-progress"]) == 0
    samples = read_dataset(out)
    assert [s.atoms.info["config_type"] for s in samples] == ["crystal", "crystal", "surface"]
    assert "3 frames" in capsys.readouterr().out
    assert summary_main([str(out)]) == 0
    printed = capsys.readouterr().out
    assert "3 frames" in printed and "crystal" in printed and "surface" in printed
