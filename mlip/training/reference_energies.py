"""Per-element reference energies (by least squares, or from isolated-atom structures) and the
energy scale of the model output."""

from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from mlip.training.samples import atoms_of, labels_of


def composition_matrix(samples: Sequence, species_numbers: Sequence[int]) -> np.ndarray:
    """[n_structures, n_species]: how many atoms of each species every structure has."""
    from mlip.data.sample import frame_location
    from mlip.elements import to_symbols

    column = {int(z): k for k, z in enumerate(species_numbers)}
    counts = np.zeros((len(samples), len(column)))
    for i, sample in enumerate(samples):
        for z in atoms_of(sample).numbers:
            if int(z) not in column:
                source = getattr(sample, "source", "")  # Samples read from a file know where they came from
                where = frame_location(source, sample.index) if source else f"structure {i}"
                raise ValueError(f"{where} contains {to_symbols([z])[0]}, which is not among the model's "
                                 f"species ({', '.join(to_symbols(species_numbers))})")
            counts[i, column[int(z)]] += 1
    return counts


def fit_reference_energies(samples: Sequence, species_numbers: Sequence[int], ridge: float = 1e-8) -> np.ndarray:
    """E_ref [n_species] minimising Σ_structures (E − Σ_i E_ref[Z_i])² (eV per atom of each element).

    A tiny ridge term keeps elements that never vary independently (e.g. always together in the
    same ratio) finite; elements absent from the data get 0.
    """
    counts = composition_matrix(samples, species_numbers)
    energies = np.array([labels_of(s, f"structure {i}").energy for i, s in enumerate(samples)])
    return per_element_least_squares(counts, energies, ridge)


def per_element_least_squares(counts: np.ndarray, values: np.ndarray, ridge: float = 1e-8) -> np.ndarray:
    """c [n_species] minimising Σ_s (values[s] − Σ_k counts[s, k] c[k])² (counts [n_structures,
    n_species]), with a tiny ridge term relative to the mean diagonal of countsᵀcounts."""
    a = counts.T @ counts + ridge * np.eye(counts.shape[1]) * max(1.0, np.trace(counts.T @ counts) / counts.shape[1])
    return np.linalg.solve(a, counts.T @ np.asarray(values, dtype=float))


def is_isolated_atom(atoms, cutoff: float) -> bool:
    """One atom with no neighbour within ``cutoff`` (Å), periodic images included."""
    if len(atoms) != 1:
        return False
    from mlip.graph import batch_atoms

    return batch_atoms([atoms], cutoff).edge_index.shape[1] == 0


def isolated_atom_energies(samples: Sequence, species_numbers: Sequence[int], cutoff: float) -> np.ndarray:
    """E_iso [n_species] (eV): the labelled energy of each element's isolated-atom structure(s) (see
    :func:`is_isolated_atom`). ValueError naming the elements without one, or an element whose
    isolated-atom structures disagree (by more than 1 meV)."""
    from mlip.elements import to_symbols

    found = {}
    for i, sample in enumerate(samples):
        atoms = atoms_of(sample)
        if is_isolated_atom(atoms, cutoff):
            found.setdefault(int(atoms.numbers[0]), []).append((labels_of(sample, f"structure {i}").energy, i))
    missing = [z for z in species_numbers if int(z) not in found]
    if missing:
        raise ValueError(
            "isolated-atom reference energies need one structure per element holding a single atom with no "
            f"neighbour within the {cutoff} Å cutoff; none for {', '.join(to_symbols(missing))}"
            + (f" (found: {', '.join(to_symbols(sorted(found)))})" if found else ""))
    out = []
    for z in species_numbers:
        energies = found[int(z)]
        values = [e for e, _ in energies]
        if max(values) - min(values) > 1e-3:
            raise ValueError(f"isolated {to_symbols([int(z)])[0]} atoms disagree: energies {values} eV in "
                             f"structures {[i for _, i in energies]}")
        out.append(float(np.mean(values)))
    return np.array(out)


def output_scale(samples: Sequence, species_numbers: Sequence[int], reference: np.ndarray) -> Tuple[float, str]:
    """A natural unit for the model output (eV): the RMS force component when forces are labelled
    (times 1 Å), else the RMS per-atom energy left after the reference energies. Returns (scale, what)."""
    forces = [labels_of(s).forces for s in samples]
    forces = [f for f in forces if f is not None and f.size]
    if forces:
        rms = float(np.sqrt(np.mean(np.concatenate([f.reshape(-1) for f in forces]) ** 2)))
        if rms > 0:
            return rms, "RMS force component (eV/Å × 1 Å)"
    counts = composition_matrix(samples, species_numbers)
    energies = np.array([labels_of(s).energy for s in samples])
    residual = (energies - counts @ reference) / counts.sum(axis=1)
    rms = float(np.sqrt(np.mean(residual**2)))
    return (rms if rms > 0 else 1.0), "RMS per-atom energy after reference energies"
