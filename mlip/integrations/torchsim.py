"""torch-sim (``torch-sim-atomistic``) as an engine for mlip potentials: batched FIRE relaxation.

:class:`MLIPModel` exposes any :class:`mlip.Potential` as a torch-sim model
(``torch_sim.models.interface.ModelInterface``): from a ``SimState`` holding many structures it
builds one :class:`mlip.graph.AtomicGraph` with mlip's neighbour list and returns ``energy``
[n_systems] (eV), ``forces`` [n_atoms, 3] (eV/Å) and ``stress`` [n_systems, 3, 3] (eV/Å³), all
detached. Conventions: torch-sim stores cells with the lattice vectors as *columns*
(``state.cell``; ``state.row_vector_cell`` is ASE's and mlip's rows), and its stress has ASE's sign
(the cell filters form the virial as −V·stress), which is mlip's, so only the Voigt six are
expanded to the symmetric 3×3.

:func:`relax_batched` relaxes many structures with torch-sim's FIRE (its ``ase_fire`` flavour, ASE's
parameters) on a Fréchet cell filter, in one batched evaluation per step: a structure leaves the
batch as soon as it has converged (or used its steps, or its energy or forces stopped being finite)
and the next ones enter, through torch-sim's ``InFlightAutoBatcher``; the results come out as the
structures leave. The convergence test is ASE's for FIRE on ``FrechetCellFilter``: the largest norm
among the atoms' forces and the rows of the cell force (virial over the atom count) below ``fmax``.

torch-sim needs Python >= 3.12: importing this module elsewhere raises
:class:`mlip.extras.MissingExtraError` saying what to install
(:func:`mlip.integrations.require_torch_sim`).
"""

from __future__ import annotations

import copy
import time
from typing import Any, Hashable, Iterable, Iterator, List, Tuple, Union

import torch
from ase import Atoms

from mlip.integrations import require_torch_sim

#: the torch-sim release this module is written against (the ``torchsim`` extra pins it)
TORCH_SIM_VERSION = "0.6.2"


ts = require_torch_sim()

from torch_sim.models.interface import ModelInterface  # noqa: E402

from mlip.calculators.mlip_calculator import resolve_device, resolve_dtype  # noqa: E402
from mlip.graph import AtomicGraph  # noqa: E402
from mlip.neighbors import batched_neighbor_list  # noqa: E402
from mlip.potential import Potential  # noqa: E402
from mlip.workflows.relax import RelaxResult  # noqa: E402

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


class BatchEvaluationError(RuntimeError):
    """A batched evaluation raised: every structure in the batch at that moment gets this error
    (the cause is in ``__cause__``), since the one that caused it is not known."""


def _cell_fmax(state) -> torch.Tensor:
    """[n_systems] ASE's fmax on FrechetCellFilter: the largest norm among the atoms' forces and the
    rows of the cell force."""
    atoms_max = ts.system_wise_max_force(state)
    cell_max = state.cell_forces.norm(dim=2).max(dim=1).values
    return torch.maximum(atoms_max, cell_max)


def relax_batched(
    structures: Iterable[Tuple[Hashable, Atoms]],
    model: MLIPModel,
    fmax: float = 0.02,
    steps: int = 500,
    max_atoms: int = 512,
    init_chunk: int = 32,
) -> Iterator[Tuple[Hashable, Union[RelaxResult, Exception], float]]:
    """Relax ``structures`` = [(key, atoms), ...] in batches; yield ``(key, outcome, seconds)`` for
    each structure as it leaves the batch, in that order.

    ``outcome`` is a :class:`mlip.workflows.relax.RelaxResult` (the relaxed copy of the atoms, the
    energy of its last structure, converged, FIRE steps taken, final fmax with the cell rows) or,
    for a structure that could not be relaxed, the exception: ``RuntimeError`` for a non-finite
    energy or forces, :class:`BatchEvaluationError` for every structure of a batch whose evaluation
    raised (an invalid structure; check them first), any other error raised while a structure
    entered. ``seconds`` is the wall time from its entering the batch to its leaving.

    Args:
        structures: (key, ``ase.Atoms``) pairs, all periodic in three directions; read lazily.
        model: the :class:`MLIPModel` to relax with.
        fmax: force threshold (eV/Å), ASE's criterion on ``FrechetCellFilter``.
        steps: most FIRE steps per structure.
        max_atoms: the batch holds structures of at most this many atoms in all (torch-sim's
            ``InFlightAutoBatcher`` with ``memory_scales_with="n_atoms"``).
        init_chunk: structures prepared together when they enter (one batched evaluation).
    """
    if not fmax > 0:
        raise ValueError(f"fmax must be positive, got {fmax}")
    if int(steps) < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    entered: List[Tuple[Hashable, Atoms, float]] = []  # by the batcher's index: key, atoms, entry time
    failed_on_entry: List[Tuple[Hashable, Exception, float]] = []

    def fire_init(atoms_list: List[Atoms]):
        state = ts.io.atoms_to_state(atoms_list, model.device, model.dtype)
        return ts.fire_init(state, model, fire_flavor="ase_fire", cell_filter=ts.CellFilter.frechet)

    def prepared() -> Iterator[Any]:
        pending: List[Tuple[Hashable, Atoms]] = []

        def flush() -> Iterator[Any]:
            try:
                states = fire_init([a for _, a in pending]).split()
            except Exception:  # find the structure(s) at fault: one at a time
                states = []
                for key, atoms in pending:
                    try:
                        states.append(fire_init([atoms]))
                    except Exception as err:
                        failed_on_entry.append((key, err, 0.0))
                        states.append(None)
            for (key, atoms), state in zip(pending, states):
                if state is not None:
                    entered.append((key, atoms, time.perf_counter()))
                    yield state
            pending.clear()

        for key, atoms in structures:
            if not all(atoms.pbc):
                raise ValueError(f"structure {key!r}: batched relaxation with the cell filter needs "
                                 f"periodicity in three directions, got pbc={atoms.pbc.tolist()}")
            pending.append((key, atoms))
            if len(pending) >= init_chunk:
                yield from flush()
        if pending:
            yield from flush()

    batcher = ts.InFlightAutoBatcher(model, memory_scales_with="n_atoms", max_memory_scaler=float(max_atoms))
    states = prepared()
    try:
        batcher.load_states(states)
    except StopIteration:  # nothing entered
        yield from failed_on_entry
        return
    state, _ = batcher.next_batch(None, None)
    n_steps: dict = {}
    while state is not None:
        yield from failed_on_entry
        failed_on_entry.clear()
        current = list(batcher.current_idx)  # the batcher's index of each structure of the batch
        taken = torch.tensor([n_steps.get(i, 0) for i in current], device=state.energy.device)
        fmax_now = _cell_fmax(state)
        bad_atoms = (~state.forces.isfinite()).any(1).to(fmax_now.dtype)
        forces_ok = torch.zeros_like(fmax_now).index_add(0, state.system_idx, bad_atoms) == 0
        finite = state.energy.isfinite() & fmax_now.isfinite() & forces_ok
        leave = ~finite | (fmax_now < fmax) | (taken >= int(steps))
        if bool(leave.any()):
            now = time.perf_counter()
            out = []
            for k in torch.nonzero(leave).flatten().tolist():
                key, atoms, t0 = entered[current[k]]
                n = int(taken[k])
                if not bool(finite[k]):
                    error = RuntimeError(f"non-finite forces at relaxation step {n}; stopping")
                    out.append((key, error, now - t0))
                    continue
                relaxed = atoms.copy()
                relaxed.set_cell(state.row_vector_cell[k].detach().cpu().double().numpy(), scale_atoms=False)
                mask = state.system_idx == k
                relaxed.positions = state.positions[mask].detach().cpu().double().numpy()
                out.append((key, RelaxResult(atoms=relaxed, energy=float(state.energy[k]),
                                             converged=bool(fmax_now[k] < fmax), n_steps=n,
                                             fmax_final=float(fmax_now[k])), now - t0))
            state, _ = batcher.next_batch(state, leave)  # the next structures enter (prepared by fire_init)
            yield from out
            continue
        try:
            state = ts.fire_step(state=state, model=model, fire_flavor="ase_fire")
        except Exception as err:  # the batch cannot go on: every structure in it leaves with the error
            now = time.perf_counter()
            for i in current:
                key, _, t0 = entered[i]
                error = BatchEvaluationError(f"the batched evaluation failed ({type(err).__name__}: {err})")
                error.__cause__ = err
                yield key, error, now - t0
            state, _ = batcher.next_batch(state, torch.ones(len(current), dtype=torch.bool))
            continue
        for i in current:
            n_steps[i] = n_steps.get(i, 0) + 1
    yield from failed_on_entry


__all__ = ["BatchEvaluationError", "MLIPModel", "TORCH_SIM_VERSION", "relax_batched"]
