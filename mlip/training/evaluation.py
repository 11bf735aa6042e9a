"""Errors of a model on labelled structures: MAE/RMSE of energy per atom, forces and stress, force
errors per element, and a parity plot."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable, Dict, Iterable, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from mlip.training.samples import atoms_of, labels_of

UNITS = {"energy": "meV_per_atom", "forces": "meV_per_A", "stress": "meV_per_A3"}


def predictions(model, samples: Sequence, batch_size: int = 16, dtype: str = "float32", device="cpu",
                on_batch: Optional[Callable] = None) -> Dict:
    """Predicted and reference values, flattened per quantity.

    ``model`` is an :class:`mlip.Potential` (evaluated in batches) or any ASE calculator
    (structure by structure). ``on_batch(out, chunk)``, if given, also receives the potential's
    output dict and the samples of every batch (the trainer computes its validation loss from the
    same pass). Returns ``{"energy": (pred, ref) per atom [n_structures] (eV/atom),
    "forces": (pred, ref, Z) [n_atoms·3] (eV/Å), "stress": (pred, ref) [6·n_with_stress] (eV/Å³)}``.
    """
    return flatten_predictions(*structure_predictions(model, samples, batch_size, dtype, device, on_batch))


def structure_predictions(model, samples: Sequence, batch_size: int = 16, dtype: str = "float32", device="cpu",
                          on_batch: Optional[Callable] = None) -> Tuple[list, list, list, list]:
    """What :func:`predictions` flattens, structure by structure: ``(samples, energies, forces,
    stresses)`` with the total energy (eV), forces [n_atoms, 3] and Voigt stress [6] (NaN where the
    structure has none) of each sample."""
    import mlip

    all_samples, all_energies, all_forces, all_stresses = [], [], [], []
    is_potential = isinstance(model, mlip.Potential)
    if is_potential:
        torch_dtype = getattr(torch, dtype)
        model = model.to(torch_dtype)
    for start in range(0, len(samples), batch_size):
        chunk = samples[start:start + batch_size]
        structures = [atoms_of(s) for s in chunk]
        if is_potential:
            graph = mlip.batch_atoms(structures, model.cutoff, dtype=torch_dtype, device=device)
            out = model(graph, compute_forces=True, compute_stress=True)
            if on_batch is not None:
                on_batch({k: v.detach() for k, v in out.items()}, chunk)
            energies = out["energy"].detach().cpu().numpy()
            forces = np.split(out["forces"].detach().cpu().numpy(), np.cumsum([len(a) for a in structures])[:-1])
            stresses = out["stress"].detach().cpu().numpy()
        else:
            energies, forces, stresses = [], [], []
            for atoms in structures:
                a = atoms.copy()
                a.calc = model
                energies.append(a.get_potential_energy())
                forces.append(a.get_forces())
                stresses.append(a.get_stress() if a.cell.rank == 3 and a.pbc.all() else np.full(6, np.nan))
        all_samples.extend(chunk)
        all_energies.extend(float(e) for e in energies)
        all_forces.extend(forces)
        all_stresses.extend(stresses)
    return all_samples, all_energies, all_forces, all_stresses


def flatten_predictions(samples: Sequence, energies, forces, stresses) -> Dict:
    """The :func:`predictions` dict from per-structure predicted total energies (eV), forces
    [n_atoms, 3] and Voigt stresses (NaN or None where there is none). A stress counts where the
    structure has a stress label and the prediction is finite."""
    e_pred, e_ref, f_pred, f_ref, f_z, s_pred, s_ref = [], [], [], [], [], [], []
    for k, sample in enumerate(samples):
        lab = labels_of(sample, f"structure {k}")
        structure = atoms_of(sample)
        n = len(structure)
        e_pred.append(float(energies[k]) / n)
        e_ref.append(lab.energy / n)
        if lab.forces is not None:
            f_pred.append(np.asarray(forces[k], dtype=float).reshape(-1))
            f_ref.append(lab.forces.reshape(-1))
            f_z.append(np.repeat(structure.numbers, 3))
        if lab.stress is not None and stresses[k] is not None and np.all(np.isfinite(stresses[k])):
            s_pred.append(np.asarray(stresses[k], dtype=float))
            s_ref.append(lab.stress)

    def cat(parts):
        return np.concatenate(parts) if parts else np.zeros(0)

    return {"energy": (np.array(e_pred), np.array(e_ref)),
            "forces": (cat(f_pred), cat(f_ref), cat(f_z).astype(int)),
            "stress": (cat(s_pred), cat(s_ref))}


def error_metrics(preds: Dict) -> Dict[str, float]:
    """MAE and RMSE (meV/atom, meV/Å, meV/Å³) and force MAE per element (meV/Å)."""
    from ase.data import chemical_symbols

    out: Dict[str, float] = {}
    for key in ("energy", "forces", "stress"):
        pred, ref = preds[key][0], preds[key][1]
        d = pred - ref
        out[f"{key}_mae_{UNITS[key]}"] = 1e3 * float(np.abs(d).mean()) if d.size else math.nan
        out[f"{key}_rmse_{UNITS[key]}"] = 1e3 * float(np.sqrt((d * d).mean())) if d.size else math.nan
    f_pred, f_ref, z = preds["forces"]
    for number in sorted(set(z.tolist())):
        sel = z == number
        out[f"forces_mae_{chemical_symbols[number]}_meV_per_A"] = 1e3 * float(np.abs(f_pred[sel] - f_ref[sel]).mean())
    return out


def evaluate(model, samples: Sequence, batch_size: int = 16, dtype: str = "float32", device="cpu",
             on_batch: Optional[Callable] = None) -> Dict[str, float]:
    """:func:`error_metrics` of :func:`predictions` (the trainer's validation metrics)."""
    return error_metrics(predictions(model, list(samples), batch_size, dtype, device, on_batch))


def energy_offsets(samples: Sequence, energies: Sequence[float]) -> Dict[int, float]:
    """Per-element constants δ_Z (eV per atom of element Z) minimising Σ_s (E_s − Ê_s − Σ_{i∈s} δ_{Z_i})²
    over the labelled ``samples`` (E_s) and predicted total ``energies`` (Ê_s): what separates two
    methods whose zero of energy differs element by element (another code's pseudopotentials, a
    model fitted to corrected energies). ``{atomic number: δ}``."""
    from mlip.training.reference_energies import composition_matrix, per_element_least_squares

    numbers = sorted({int(z) for s in samples for z in atoms_of(s).numbers})
    residuals = [labels_of(s, f"structure {k}").energy - float(e)
                 for k, (s, e) in enumerate(zip(samples, energies))]
    offsets = per_element_least_squares(composition_matrix(samples, numbers), np.array(residuals))
    return {z: float(d) for z, d in zip(numbers, offsets)}


def evaluate_groups(model, samples: Sequence, group_of: Callable[[object], Union[str, Iterable[str]]],
                    batch_size: int = 16, dtype: str = "float32", device="cpu", align_energies: bool = False
                    ) -> Tuple[Dict[str, float], Dict[str, Tuple[int, Dict[str, float]]]]:
    """:func:`evaluate` on all ``samples`` and on groups of them, from one prediction pass.

    ``group_of(sample)`` names the group of a sample, or several (a sample may count in more than one,
    e.g. ``cluster`` and ``dimer``). Returns the metrics of all samples and ``{group: (n_structures,
    metrics)}``, groups in sorted order. With ``align_energies`` the predicted energies are first
    shifted by the per-element :func:`energy_offsets` fitted on all ``samples`` (for labels of another
    code, whose energy zero differs per element), and the overall metrics list the offsets as
    ``energy_offset_<element>_eV``; forces and stress are not changed.
    """
    from ase.data import chemical_symbols

    samples = list(samples)
    per_structure = structure_predictions(model, samples, batch_size, dtype, device)
    offsets = {}
    if align_energies:
        offsets = energy_offsets(samples, per_structure[1])
        shifted = [e + sum(offsets[int(z)] for z in atoms_of(s).numbers)
                   for s, e in zip(samples, per_structure[1])]
        per_structure = (per_structure[0], shifted, per_structure[2], per_structure[3])
    members = defaultdict(list)
    for k, sample in enumerate(samples):
        names = group_of(sample)
        for name in ([names] if isinstance(names, str) else names):
            members[name].append(k)

    def metrics_of(indices):
        return error_metrics(flatten_predictions(*([column[k] for k in indices] for column in per_structure)))

    overall = error_metrics(flatten_predictions(*per_structure))
    overall.update({f"energy_offset_{chemical_symbols[z]}_eV": d for z, d in offsets.items()})
    return overall, {name: (len(members[name]), metrics_of(members[name])) for name in sorted(members)}


def parity_plot(preds: Dict, path, title: Optional[str] = None) -> None:
    """Predicted vs reference energy per atom, force components and stress components (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mlip.io import atomic_write

    metrics = error_metrics(preds)
    panels = [("energy", "energy (eV/atom)", 1.0, "meV/atom"), ("forces", "force component (eV/Å)", 1.0, "meV/Å"),
              ("stress", "stress component (GPa)", 160.21766208, "meV/Å³")]
    panels = [p for p in panels if preds[p[0]][0].size]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), squeeze=False, layout="constrained")
    for ax, (key, label, factor, unit) in zip(axes[0], panels):
        pred, ref = preds[key][0] * factor, preds[key][1] * factor
        lo, hi = float(min(pred.min(), ref.min())), float(max(pred.max(), ref.max()))
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.7)
        ax.scatter(ref, pred, s=4, alpha=0.5)
        ax.set_xlabel(f"reference {label}")
        ax.set_ylabel(f"predicted {label}")
        ax.set_title(f"MAE {metrics[f'{key}_mae_{UNITS[key]}']:.2f} {unit}", fontsize=10)
    if title:
        fig.suptitle(title, fontsize=10)
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=130, format="png"))
    plt.close(fig)
