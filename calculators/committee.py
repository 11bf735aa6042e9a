"""A committee of potentials as one ASE calculator: the members' mean, with their spread as uncertainty.

N potentials trained from different seeds (the same data, architecture and cutoff) agree where the
training data were dense and disagree where they were thin; their spread ranks structures by how
wrong the mean is likely to be (how well, for a committee of the package's models on EMT data, is
measured by ``benchmarks/accuracy/committee_calibration.py``, cost by ``benchmarks/speed/committee_cost.py``).

Every member is evaluated on one graph (one neighbour list, one set of checks) and the gradients of all
members are taken in one backward pass: each member gets its own position and strain leaves
(:meth:`mlip.Potential.differentiable_energy`), and ``torch.autograd.grad`` of the summed energies
returns every member's forces and stress at once. :func:`committee_outputs` does this for a batched
graph, :func:`committee_predictions` for a list of structures in batches (how a pool of candidates is
scored), :class:`CommitteeCalculator` for one structure.
"""

from __future__ import annotations

import copy
from typing import Dict, List, Sequence, Union

import numpy as np
import torch
from ase.calculators.calculator import all_changes

from mlip.allocator import tune_malloc
from mlip.calculators.mlip_calculator import GraphCalculator, resolve_device, resolve_dtype
from mlip.graph import AtomicGraph
from mlip.graph_builder import GraphBuilder
from mlip.potential import Potential


def load_members(members: Sequence[Union[str, Potential]]) -> List[Potential]:
    """The potentials of ``members`` (potentials, checkpoint paths or shipped model names), checked to
    make a committee: at least two, one cutoff (they share one graph); ValueError naming the problem."""
    from mlip.pretrained import load_potential

    potentials = [m if isinstance(m, Potential) else load_potential(str(m)) for m in members]
    if len(potentials) < 2:
        raise ValueError(f"a committee needs at least two potentials, got {len(potentials)}")
    cutoffs = sorted({float(p.cutoff) for p in potentials})
    if len(cutoffs) > 1:
        listed = ", ".join(map(str, cutoffs))
        raise ValueError(f"the committee's potentials have different cutoffs ({listed} Å); "
                         "its members share one neighbour list, so they need one cutoff")
    return potentials


def committee_outputs(potentials: Sequence[Potential], graph: AtomicGraph,
                      compute_stress: bool = True) -> Dict[str, torch.Tensor]:
    """Every member's predictions on ``graph``, stacked along a first axis of size M (the members):
    ``energy`` [M, n_graphs], ``energies`` [M, n_atoms], ``forces`` [M, n_atoms, 3] and, with
    ``compute_stress``, ``stress`` [M, n_graphs, 6] (NaN where a structure has no volume). One forward
    pass per member and one backward pass for all of them; the tensors are detached."""
    with torch.enable_grad():
        outs, inputs, leaves = [], [], []
        total = None
        for potential in potentials:
            out, positions, strain = potential.differentiable_energy(graph, True, compute_stress)
            outs.append(out)
            member_inputs = [t for t in (positions, strain) if t is not None]
            inputs.extend(member_inputs)
            leaves.append((positions, strain, len(member_inputs)))
            energy = out["energy"].sum()
            total = energy if total is None else total + energy
        grads = torch.autograd.grad(total, inputs, allow_unused=True)
    result: Dict[str, List[torch.Tensor]] = {"energy": [], "energies": [], "forces": [], "stress": []}
    k = 0
    for out, (positions, strain, n) in zip(outs, leaves):
        out.update(Potential.derivatives(graph, positions, strain, grads[k:k + n]))
        k += n
        for key in result:
            if key in out:
                result[key].append(out[key].detach())
    return {key: torch.stack(values) for key, values in result.items() if values}


def committee_predictions(potentials: Sequence[Potential], structures: Sequence, batch_size: int = 16,
                          dtype: str = "float32", device="cpu", progress: bool = False,
                          desc: str = "committee") -> List[Dict[str, np.ndarray]]:
    """The committee's mean and spread for each of ``structures`` (``ase.Atoms``), ``batch_size`` of them
    per batched graph: one dict per structure with ``energy`` (eV), ``forces`` [n, 3], ``stress`` [6]
    (NaN without a volume), the means, and ``energy_uncertainty`` (eV), ``forces_uncertainty`` [n]
    (eV/Å), as :class:`CommitteeCalculator` defines them. The potentials are copied to ``dtype`` and
    ``device`` (the originals are left as they are)."""
    from mlip.graph import batch_atoms

    torch_dtype = resolve_dtype(dtype)
    members = [copy.deepcopy(p).to(device=device, dtype=torch_dtype).requires_grad_(False).eval()
               for p in load_members(potentials)]
    results: List[Dict[str, np.ndarray]] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(structures), desc=desc, unit="structure", leave=False, dynamic_ncols=True)
    for start in range(0, len(structures), batch_size):
        chunk = list(structures[start:start + batch_size])
        graph = batch_atoms(chunk, members[0].cutoff, dtype=torch_dtype, device=device)
        out = {k: v.to(torch.float64).cpu().numpy() for k, v in committee_outputs(members, graph).items()}
        offset = 0
        for k, atoms in enumerate(chunk):
            forces = out["forces"][:, offset:offset + len(atoms)]
            offset += len(atoms)
            results.append({"energy": float(out["energy"][:, k].mean()), "forces": forces.mean(axis=0),
                            "stress": out["stress"][:, k].mean(axis=0),
                            "energy_uncertainty": float(spread(out["energy"][:, k])),
                            "forces_uncertainty": spread(forces)})
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()
    return results


def spread(values: np.ndarray) -> np.ndarray:
    """The committee's standard deviation over its first axis (the members), population form
    (√(mean over members of the squared deviation from the mean)); for vectors (last axis of size 3) the
    norm of the deviation is taken: σ_i = √((1/M) Σ_m |F_i^m − F̄_i|²)."""
    deviation = values - values.mean(axis=0)
    if values.ndim >= 3 and values.shape[-1] == 3:
        return np.sqrt((deviation ** 2).sum(axis=-1).mean(axis=0))
    return np.sqrt((deviation ** 2).mean(axis=0))


class CommitteeCalculator(GraphCalculator):
    """ASE calculator of a committee of potentials: the mean of the members' predictions, and their
    spread as uncertainty.

    Properties: ``energy``, ``free_energy`` (= energy), ``energies`` (per atom), ``forces``, ``stress``
    (Voigt, eV/Å³, ASE sign; needs a cell of non-zero volume): each the mean over the members; and

    * ``energy_uncertainty`` (eV): the members' standard deviation of the total energy,
      √((1/M) Σ_m (E_m − Ē)²);
    * ``forces_uncertainty`` [n_atoms] (eV/Å): per atom, the members' standard deviation of the force
      vector, σ_i = √((1/M) Σ_m |F_i^m − F̄_i|²);
    * ``committee_energies`` [M] (eV): every member's total energy.

    ``atoms.calc.get_property("forces_uncertainty", atoms)`` (or the calculator's ``results`` after any
    property) returns them; they are computed in the same pass as the mean. Results are cached until
    positions, numbers, cell, pbc or ``atoms.info`` change, as for :class:`MLIPCalculator`.

    Args:
        potentials: two or more :class:`mlip.Potential` (or checkpoint paths, or shipped model names)
            with one cutoff; the calculator keeps frozen copies on ``device`` in ``dtype``.
        device: as for :class:`mlip.calculators.MLIPCalculator`.
        dtype: as for :class:`mlip.calculators.MLIPCalculator`.
        neighbor_backend: as for :class:`mlip.calculators.MLIPCalculator`.

    Cost: one neighbour list and one backward pass for the whole committee; the forward passes are the
    members' own (measured by ``benchmarks/speed/committee_cost.py``).
    """

    implemented_properties = ["energy", "free_energy", "energies", "forces", "stress", "energy_uncertainty",
                              "forces_uncertainty", "committee_energies"]
    ignored_changes: set = set()

    def __init__(self, potentials: Sequence[Union[str, Potential]], device="auto", dtype="float32",
                 neighbor_backend: str = "auto", **kwargs):
        super().__init__(**kwargs)
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        members = load_members(potentials)
        self.potentials = [copy.deepcopy(p).to(device=self.device, dtype=self.dtype).requires_grad_(False)
                           .eval() for p in members]
        numbers = sorted(set.intersection(*(set(p.atomic_numbers.tolist()) for p in self.potentials)))
        self._builder = GraphBuilder(self.potentials[0].cutoff, dtype=self.dtype, device=self.device,
                                     neighbor_backend=neighbor_backend, allowed_numbers=numbers)
        if self.device.type == "cpu":
            tune_malloc()

    def _graph_builder(self) -> GraphBuilder:
        return self._builder

    def calculate(self, atoms=None, properties=None, system_changes=all_changes):
        if properties is None:
            properties = self.implemented_properties
        atoms, graph, has_volume = self._start(atoms, properties, system_changes)
        out = {k: v.to(torch.float64).cpu().numpy() for k, v in
               committee_outputs(self.potentials, graph, compute_stress=has_volume).items()}
        energies = out["energy"][:, 0]
        if not np.all(np.isfinite(energies)):
            raise RuntimeError("a member of the committee returned a non-finite energy")
        energy = float(energies.mean())
        self.results = {
            "energy": energy,
            "free_energy": energy,
            "energies": out["energies"].mean(axis=0),
            "forces": out["forces"].mean(axis=0),
            "energy_uncertainty": float(spread(energies)),
            "forces_uncertainty": spread(out["forces"]),
            "committee_energies": energies,
        }
        if has_volume:
            self.results["stress"] = out["stress"][:, 0].mean(axis=0)

    def get_energy_uncertainty(self, atoms=None) -> float:
        """The members' standard deviation of the total energy (eV)."""
        return float(self.get_property("energy_uncertainty", atoms))

    def get_forces_uncertainty(self, atoms=None) -> np.ndarray:
        """Per atom, the members' standard deviation of the force vector [n_atoms] (eV/Å)."""
        return np.asarray(self.get_property("forces_uncertainty", atoms))


__all__ = ["CommitteeCalculator", "committee_outputs", "committee_predictions", "load_members", "spread"]
