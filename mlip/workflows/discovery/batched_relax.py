"""Batched relaxation with torch-sim: many structures relaxed by one batched evaluation per step of an
mlip model (:class:`mlip.integrations.torchsim.MLIPModel`), the engine of ``--batch-size`` in the
discovery relaxation campaign (:mod:`mlip.workflows.discovery.relax_campaign`).

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

import time
from typing import Any, Hashable, Iterable, Iterator, List, Tuple, Union

import torch
from ase import Atoms

from mlip.integrations import require_torch_sim
from mlip.integrations.torchsim import MLIPModel
from mlip.workflows.relax import RelaxResult

ts = require_torch_sim()


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


__all__ = ["BatchEvaluationError", "relax_batched"]
