"""torch.compile for a calculator's evaluation, with a warned fall-back to eager execution.

The whole evaluation is compiled as one graph (:class:`CompiledEvaluation`): the edge vectors, the
network, the potential's terms and the first derivatives of the energy in the positions and the strain
(forces and stress), which torch.compile traces into the graph with ``trace_autograd_ops`` rather than
leaving them to autograd. A call then runs one compiled function instead of thousands of small
operations and their autograd bookkeeping, which is what a small cell's call costs eagerly
(docs/speed.md). Shapes are dynamic (atom and edge counts change from call to call); the first call
compiles (minutes on a CPU for the shipped transformers), and a structure of another size may compile
once more (sizes 0 and 1 are specialised, and the compiler may bound a size's range).

A compilation that fails (no C compiler for the CPU backend, an operation the compiler does not
support, torch's limit on recompilations, ...) does not stop the calculation: the call is repeated
eagerly, a ``CompileFallbackWarning`` names the problem in one line, and the calculator stays eager from
then on. The results are the same either way to rounding; only the speed differs.
"""

from __future__ import annotations

import warnings
from typing import Dict, Optional, Tuple

import torch

from mlip.graph import AtomicGraph, edge_vectors
from mlip.nn import edge_indices_within
from mlip.potential import Potential


class CompileFallbackWarning(RuntimeWarning):
    """torch.compile failed; the evaluation runs eagerly (same results, eager speed)."""


def first_line(err: BaseException, limit: int = 300) -> str:
    """``TypeName: first line of the message`` (with the second when the first ends in a colon, as
    "backend='inductor' raised:" does; dynamo's generic hint "Set TORCHDYNAMO_VERBOSE=1 ..." is not a
    line of the message), at most ``limit`` characters."""
    lines = [line.strip() for line in str(err).strip().splitlines()
             if line.strip() and not line.strip().startswith("Set TORCHDYNAMO_VERBOSE")]
    message = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else lines[0] if lines else ""
    text = f"{type(err).__name__}: {message}" if message else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def warm_up(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """One eager call of ``model`` on two atoms of the first species joined by two edges, without
    gradients, so that what a network caches on its first call (constants derived from its
    hyperparameters) is computed eagerly rather than traced by the compiler."""
    device = next((t.device for t in model.parameters()), torch.device("cpu"))
    species = torch.zeros(2, dtype=torch.int64, device=device)
    edge_index = torch.tensor([[0, 1], [1, 0]], device=device)
    vectors = torch.tensor([[1.5, 0.3, 0.2], [-1.5, -0.3, -0.2]], dtype=dtype, device=device)
    batch = torch.zeros(2, dtype=torch.int64, device=device)
    with torch.no_grad():
        model(species, edge_index, vectors, batch, 1)


def attention_radius(potential: Potential) -> Optional[float]:
    """The attention radius (Å) of a network whose attention reaches less far than the graph
    (``model.attention_cutoff``): its edges are selected before a compiled graph. None otherwise."""
    cutoff = getattr(potential.model, "attention_cutoff", None)
    return cutoff if cutoff is not None and cutoff < potential.cutoff else None


def eager_inputs(potential: Potential, graph: AtomicGraph, attention_cutoff: Optional[float]
                 ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """What a compiled graph of ``Potential.forward`` takes from outside, computed eagerly because it
    depends on the data: the species indices (the lookup checks the atomic numbers and raises
    ValueError) and, given an ``attention_cutoff`` (:func:`attention_radius`), the indices of the edges
    within it, selected from the same edge vectors the eager network would compute (None otherwise)."""
    species = potential.species_index(graph.numbers)
    if attention_cutoff is None:
        return species, None
    with torch.no_grad():
        vectors = edge_vectors(graph.positions, graph.cell, graph.batch, graph.edge_index, graph.shifts)
    return species, edge_indices_within(vectors, attention_cutoff)


class CompiledEvaluation:
    """Energy, per-atom energies, forces and stress of a graph from one compiled graph, until it fails
    once; then eagerly (``Potential.forward``).

    torch.compile traces the whole of ``Potential.forward`` with ``trace_autograd_ops``: the edge
    vectors under a zero strain, the network and the potential's terms, and the ``autograd.grad`` of the
    energy in the positions and the strain become one forward-only graph (no AOTAutograd backward, no
    autograd bookkeeping per call), compiled with dynamic shapes and no graph break. What depends on the
    data stays outside, eagerly: the species lookup with its checks and, for a network whose attention
    reaches less far than the graph (``model.attention_cutoff``), the selection of the edges within it,
    made from the same edge vectors the eager network would compute, so both pick the same edges.
    """

    def __init__(self, potential: Potential):
        self.potential = potential
        #: the attention radius (Å) whose edges are selected before the compiled graph, or None
        self.attention_cutoff = attention_radius(potential)
        self.compiled = torch.compile(self.evaluate, dynamic=True, fullgraph=True)
        #: why compilation failed (one line), or None while the compiled evaluation is used
        self.failure = None

    def evaluate(self, graph: AtomicGraph, species: torch.Tensor, attention_edges: Optional[torch.Tensor],
                 compute_stress: bool) -> Dict[str, torch.Tensor]:
        """``Potential.forward`` with forces (and stress when ``compute_stress``), detached; compiled."""
        out = self.potential(graph, compute_forces=True, compute_stress=compute_stress, species=species,
                             attention_edges=attention_edges)
        return {key: value.detach() for key, value in out.items()}

    def __call__(self, graph: AtomicGraph, compute_stress: bool) -> Dict[str, torch.Tensor]:
        """What ``potential(graph, compute_forces=True, compute_stress=compute_stress)`` returns."""
        if self.failure is None:
            species, attention_edges = eager_inputs(self.potential, graph, self.attention_cutoff)
            try:
                from torch import _dynamo  # here, not at import: 1.5 s that only compiling needs

                with _dynamo.config.patch(trace_autograd_ops=True):
                    return self.compiled(graph, species, attention_edges, bool(compute_stress))
            except Exception as err:  # the compiler's failure; a genuine error repeats eagerly below
                result = self.potential(graph, compute_forces=True, compute_stress=compute_stress)
                self.failure = first_line(err)
                warnings.warn(
                    f"torch.compile failed for {type(self.potential.model).__name__} ({self.failure}); "
                    "running it eagerly (same results, eager speed)",
                    CompileFallbackWarning,
                    stacklevel=2,
                )
                return result
        return self.potential(graph, compute_forces=True, compute_stress=compute_stress)


def is_compiled(calc) -> bool:
    """True while the calculator ``calc`` evaluates through its compiled graph (False without
    ``compile=True`` or after a fall-back)."""
    compiled = getattr(calc, "compiled", None)
    return compiled is not None and compiled.failure is None
