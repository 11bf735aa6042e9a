"""Formation energies per atom, the way Matbench Discovery computes them.

e_form = (E − Σ_el n_el · μ_el) / N, in eV/atom, with E the total energy of the relaxed structure
(eV), n_el the number of atoms of element el, N the number of atoms and μ_el the elemental
reference energy per atom (eV/atom).

* With ComputedStructureEntries (the benchmark's ``wbm-computed-structure-entries``): the model's
  energy and relaxed structure replace the entry's, ``MaterialsProject2020Compatibility`` corrects
  the energy (anion and Hubbard-U corrections depend on the structure), and E is the corrected
  energy; μ are the MP elemental references (``mp-elemental-reference-entries.json.gz``, entries
  whose ``energy_per_atom`` is used). An entry the compatibility scheme rejects gets no formation
  energy (NaN: the benchmark then counts the material as unstable). Needs pymatgen.
* Otherwise E is the model's energy and μ come from a file of elemental reference energies
  (``{"Cu": -0.007, ...}`` in eV/atom, as the miniature benchmark writes).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Union

from ase.data import chemical_symbols

from mlip.extras import require


def _need_pymatgen(what: str):
    require("pymatgen", "discovery", what)


def _entry_energy_per_atom(data: dict, where: str) -> float:
    """Corrected energy per atom of a ``ComputedEntry``/``ComputedStructureEntry`` dict."""
    _need_pymatgen("reading elemental reference entries")
    from pymatgen.entries.computed_entries import ComputedEntry, ComputedStructureEntry

    try:
        cls = ComputedStructureEntry if "structure" in data else ComputedEntry
        return float(cls.from_dict(data).energy_per_atom)
    except Exception as err:
        raise ValueError(f"{where}: not a ComputedEntry ({type(err).__name__}: {err})") from None


def read_elemental_references(path: Union[str, Path]) -> Dict[str, float]:
    """``{element: energy per atom (eV/atom)}`` from a JSON file (plain or compressed) mapping
    each element either to a number or to a pymatgen ComputedEntry dict (MP's elemental
    reference entries). Raises ValueError naming the file and element for anything else."""
    from mlip.workflows.discovery.inputs import load_json_file

    data = load_json_file(path)
    where = repr(str(path))
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{where}: expected a JSON object mapping elements to energies per atom")
    refs = {}
    for element, value in data.items():
        if element not in chemical_symbols[1:]:
            raise ValueError(f"{where}: {element!r} is not a chemical element")
        if isinstance(value, dict):
            energy = _entry_energy_per_atom(value, f"{where}, element {element!r}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            energy = float(value)
        else:
            raise ValueError(f"{where}, element {element!r}: expected a number (eV/atom) or an entry, got {value!r}")
        if not math.isfinite(energy):
            raise ValueError(f"{where}, element {element!r}: energy is not finite")
        refs[element] = energy
    return refs


def plain_formation_energy(symbols: Sequence[str], energy: float, references: Mapping[str, float]) -> float:
    """(E − Σ μ_el) / N for the atoms ``symbols`` with total energy ``energy`` (eV) → eV/atom.
    Raises ValueError for an element without reference energy."""
    counts = Counter(symbols)
    missing = sorted(el for el in counts if el not in references)
    if missing:
        raise ValueError(f"no elemental reference energy for {', '.join(missing)}")
    return (float(energy) - sum(n * references[el] for el, n in counts.items())) / len(symbols)


def relaxed_atoms(record: dict):
    """The relaxed structure of a result record as ASE Atoms (periodic; Å)."""
    from ase import Atoms

    data = record["structure"]
    return Atoms(symbols=data["symbols"], cell=data["cell_A"], positions=data["positions_A"], pbc=True)


def formation_energies(
    records: Mapping[str, dict],
    references: Mapping[str, float],
    entries: Optional[Mapping[str, dict]] = None,
) -> Dict[str, dict]:
    """Formation energy per atom of every relaxed material.

    Args:
        records: ``{material_id: result record}`` of the relaxation (``energy`` in eV and
            ``structure`` as ``{symbols, cell_A, positions_A}``; failed records are skipped).
        references: elemental reference energies, eV/atom.
        entries: ``{material_id: ComputedStructureEntry dict}``; when given, every relaxed
            material must have one and the MP2020 scheme is applied.

    Returns:
        ``{material_id: {"e_form_per_atom": float (NaN when none), "correction_per_atom": float,
        "note": str or None}}`` for every successful record.
    """
    done = {mid: rec for mid, rec in records.items() if not rec.get("failed")}
    out: Dict[str, dict] = {}
    if entries is None:
        for mid, rec in done.items():
            symbols = rec["structure"]["symbols"]
            try:
                e_form = plain_formation_energy(symbols, rec["energy"], references)
                out[mid] = {"e_form_per_atom": e_form, "correction_per_atom": 0.0, "note": None}
            except ValueError as err:
                out[mid] = {"e_form_per_atom": math.nan, "correction_per_atom": 0.0, "note": str(err)}
        return out

    _need_pymatgen("MP2020 corrections on ComputedStructureEntries")
    from pymatgen.entries.compatibility import MaterialsProject2020Compatibility
    from pymatgen.entries.computed_entries import ComputedStructureEntry
    from pymatgen.io.ase import AseAtomsAdaptor

    missing = sorted(set(done) - set(entries))
    if missing:
        raise ValueError(f"{len(missing)} relaxed materials have no ComputedStructureEntry "
                         f"(e.g. {', '.join(missing[:5])}); give the entries of every material")
    cses = {}
    for mid, rec in done.items():
        try:
            cse = ComputedStructureEntry.from_dict(entries[mid])
        except Exception as err:
            raise ValueError(f"entry {mid!r}: not a ComputedStructureEntry ({type(err).__name__}: {err})") from None
        atoms = relaxed_atoms(rec)
        structure = AseAtomsAdaptor.get_structure(atoms)
        if structure.composition.reduced_formula != cse.composition.reduced_formula:
            raise ValueError(f"entry {mid!r}: composition {cse.composition.reduced_formula} differs from the "
                             f"relaxed structure's {structure.composition.reduced_formula}")
        # As the benchmark does: the model's energy (uncorrected) and relaxed structure replace
        # the entry's, because the MP2020 corrections depend on the structure.
        cse._energy = float(rec["energy"])
        cse._structure = structure
        cses[mid] = cse
    kept = MaterialsProject2020Compatibility().process_entries(list(cses.values()), clean=True, inplace=True)
    kept_ids = {id(e) for e in kept}
    for mid, cse in cses.items():
        if id(cse) not in kept_ids:
            out[mid] = {"e_form_per_atom": math.nan, "correction_per_atom": math.nan,
                        "note": "rejected by MaterialsProject2020Compatibility"}
            continue
        symbols = [site.specie.symbol for site in cse.structure]
        try:
            e_form = plain_formation_energy(symbols, cse.energy, references)
            out[mid] = {"e_form_per_atom": e_form, "correction_per_atom": cse.correction / len(symbols),
                        "note": None}
        except ValueError as err:
            out[mid] = {"e_form_per_atom": math.nan, "correction_per_atom": math.nan, "note": str(err)}
    return out


__all__ = ["formation_energies", "plain_formation_energy", "read_elemental_references", "relaxed_atoms"]
