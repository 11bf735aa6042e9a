"""torch-sim (``torch-sim-atomistic``) as an engine for mlip potentials: the model adapter.

:class:`MLIPModel` exposes any :class:`mlip.Potential` as a torch-sim model
(``torch_sim.models.interface.ModelInterface``): from a ``SimState`` holding many structures it
builds one :class:`mlip.graph.AtomicGraph` with mlip's neighbour list and returns ``energy``
[n_systems] (eV), ``forces`` [n_atoms, 3] (eV/Å) and ``stress`` [n_systems, 3, 3] (eV/Å³), all
detached. Conventions: torch-sim stores cells with the lattice vectors as *columns*
(``state.cell``; ``state.row_vector_cell`` is ASE's and mlip's rows), and its stress has ASE's sign
(the cell filters form the virial as −V·stress), which is mlip's, so only the Voigt six are
expanded to the symmetric 3×3.

:mod:`mlip.workflows.discovery.batched_relax` relaxes many structures with it in batches (torch-sim's
FIRE on a Fréchet cell filter), the engine of the discovery campaign's ``--batch-size``.

torch-sim needs Python >= 3.12: importing this module elsewhere raises
:class:`mlip.extras.MissingExtraError` saying what to install
(:func:`mlip.integrations.require_torch_sim`).
"""

from __future__ import annotations

import copy
from typing import Union

import torch

from mlip.integrations import require_torch_sim

#: the torch-sim release this module is written against (the ``torchsim`` extra pins it)
TORCH_SIM_VERSION = "0.6.2"

require_torch_sim()  # before torch_sim is imported: a one-line error saying what to install

from torch_sim.models.interface import ModelInterface  # noqa: E402

from mlip.calculators.mlip_calculator import resolve_device, resolve_dtype  # noqa: E402
from mlip.graph import AtomicGraph  # noqa: E402
from mlip.neighbors import batched_neighbor_list  # noqa: E402
from mlip.potential import Potential  # noqa: E402

#: Voigt index (xx, yy, zz, yz, xz, xy) of each entry of the symmetric 3×3 stress
_VOIGT_TO_FULL = torch.tensor([[0, 5, 4], [5, 1, 3], [4, 3, 2]])


class MLIPModel(ModelInterface):
    """A :class:`mlip.Potential` as a torch-sim model (see the module docstring for the outputs).

    Args:
        potential: the potential; the model keeps its own copy on ``device`` in ``dtype`` with the
            weights frozen, as :class:`mlip.MLIPCalculator` does.
        device: ``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda"``, ...
        dtype: ``"float64"`` (relaxations) or ``"float32"``; states are evaluated in it.
        neighbor_backend: mlip's neighbour list: ``"auto"``, ``"vesin"`` or ``"torch"``.
        compute_forces: :meth:`forward` returns the forces besides the energy.
        compute_stress: :meth:`forward` returns the stress besides the energy.

    Structures without a cell of non-zero volume (molecules) get a NaN stress, as in mlip.
    Elements the potential was not built for raise ``ValueError`` naming them.
    """

    def __init__(self, potential: Potential, device: Union[str, torch.device] = "auto",
                 dtype: Union[str, torch.dtype] = "float64", neighbor_backend: str = "auto",
                 compute_forces: bool = True, compute_stress: bool = True):
        super().__init__()
        if not isinstance(potential, Potential):
            raise TypeError(f"MLIPModel needs an mlip.Potential, got {type(potential).__name__}")
        self._device = resolve_device(device)
        self._dtype = resolve_dtype(dtype)
        self._compute_forces = bool(compute_forces)
        self._compute_stress = bool(compute_stress)
        self._memory_scales_with = "n_atoms_x_density"  # a radial cutoff: neighbours grow with density
        self.neighbor_backend = neighbor_backend
        potential = copy.deepcopy(potential).to(device=self._device, dtype=self._dtype)
        self.potential = potential.requires_grad_(False).eval()

    @ModelInterface.compute_stress.setter
    def compute_stress(self, value: bool) -> None:
        self._compute_stress = bool(value)

    @ModelInterface.compute_forces.setter
    def compute_forces(self, value: bool) -> None:
        self._compute_forces = bool(value)

    @property
    def cutoff(self) -> float:
        """The potential's cutoff (Å)."""
        return float(self.potential.cutoff)

    def graph(self, state) -> AtomicGraph:
        """The :class:`AtomicGraph` of every structure of ``state`` (a torch-sim ``SimState``)."""
        positions = state.positions.to(device=self._device, dtype=self._dtype)
        cell = state.row_vector_cell.to(device=self._device, dtype=self._dtype)  # [n_systems, 3, 3] rows
        n_systems = cell.shape[0]
        pbc = torch.as_tensor(state.pbc, dtype=torch.bool, device=self._device)  # one for all systems
        pbc = pbc.expand(3) if pbc.ndim == 0 else pbc
        pbc = pbc.reshape(-1, 3).expand(n_systems, 3).contiguous()
        batch = state.system_idx.to(device=self._device, dtype=torch.int64)
        on_device = self.neighbor_backend in ("torch", "cuda")
        nl_args = [t if on_device else t.detach().cpu() for t in (positions, cell, pbc, batch)]
        edge_index, shifts = batched_neighbor_list(*nl_args, self.cutoff, backend=self.neighbor_backend)
        return AtomicGraph(positions=positions, numbers=state.atomic_numbers.to(self._device, torch.int64),
                           cell=cell, pbc=pbc, batch=batch,
                           edge_index=edge_index.to(self._device, torch.int64),
                           shifts=shifts.to(self._device, self._dtype), cutoff=self.cutoff)

    def forward(self, state, **kwargs) -> dict:
        """``energy`` [n_systems], ``forces`` [n_atoms, 3] and ``stress`` [n_systems, 3, 3] of ``state``."""
        graph = self.graph(state)
        out = self.potential(graph, compute_forces=self._compute_forces, compute_stress=self._compute_stress)
        result = {"energy": out["energy"].detach()}
        if self._compute_forces:
            result["forces"] = out["forces"].detach()
        if self._compute_stress:
            result["stress"] = out["stress"].detach()[:, _VOIGT_TO_FULL.to(out["stress"].device)]
        return result


__all__ = ["MLIPModel", "TORCH_SIM_VERSION"]
