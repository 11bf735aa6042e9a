"""The training step as one compiled graph (``compile: true`` in a training config).

One function computes what an eager step computes before the optimiser: the energies, the forces and
stress kept differentiable (``Potential.forward`` with ``create_graph=True``), the loss of
:mod:`mlip.training.loss` (its ``static_shapes`` form: unlabelled stress rows are zeroed rather than
dropped) and its gradients in the weights. What depends on the data stays outside, eagerly, as in the
compiled calculator (:mod:`mlip.calculators.compiled_network`): the species lookup with its checks and,
for a network whose attention reaches less far than the graph, the selection of the edges within it;
no shape inside the graph depends on the data. torch.compile traces the
whole of it, the double backward included, with ``trace_autograd_ops`` (the autograd calls become
part of one forward-only graph; compiling only the energy network fails, since AOTAutograd has no
double backward), with dynamic shapes and no graph break. The optimiser, gradient clipping and the EMA
stay eager, as does validation.

The first call compiles (minutes on a CPU for the shipped recipes); a batch whose sizes leave the
range of the graphs compiled so far compiles another one (e.g. a structure count of 1, an edge count
of at most 1024). A compilation that fails, or a batch that would exceed torch's limit on
recompilations, does not stop the run: that step and every later one run eagerly, and a
``CompileFallbackWarning`` names the reason in one line; the epoch records count the steps of each
kind (:meth:`CompiledStep.epoch_record`).
"""

from __future__ import annotations

import warnings
from typing import Dict, Optional

import torch

from mlip.calculators.compiled_network import (CompileFallbackWarning, attention_radius, eager_inputs,
                                               first_line, warm_up)
from mlip.graph import AtomicGraph
from mlip.potential import Potential
from mlip.training.config import TrainConfig
from mlip.training.loss import combine_loss, loss_sums


class CompiledStep:
    """Loss and weight gradients of a training batch from one compiled graph, until it fails once.

    ``step(graph, target)`` puts the gradients in the ``.grad`` of the trainable parameters (as
    ``loss.backward()`` after ``zero_grad(set_to_none=True)`` does) and returns the loss (a 0-d tensor),
    or returns None, leaving the gradients alone, when the step must run eagerly (after a failure)."""

    def __init__(self, potential: Potential, config: TrainConfig, scale: float):
        self.potential, self.config, self.scale = potential, config, scale
        self.forces = config.loss.forces_weight > 0
        self.stress = config.loss.stress_weight > 0
        self.parameters = [p for p in potential.parameters() if p.requires_grad]
        #: the attention radius (Å) whose edges are selected before the compiled graph, or None
        self.attention_cutoff = attention_radius(potential)
        self.compiled = torch.compile(self.loss_and_gradients, dynamic=True, fullgraph=True)
        self.warm_up()
        #: why compilation failed (one line), or None while the compiled step is used
        self.failure: Optional[str] = None
        self.counts = {"compiled": 0, "eager": 0}

    def warm_up(self) -> None:
        """One eager call of the network in ``eval_dtype`` and one in ``dtype``: what a network caches
        on its first call in a dtype (the Platonic frames) is then computed eagerly rather than traced,
        and is there before the graph is compiled, so that the first validation in another dtype does
        not change what the graph's guards read (a recompilation). The weights are put back as they
        were, to the bit (a float64 run validated in float32 would otherwise keep them rounded)."""
        state = {key: value.clone() for key, value in self.potential.state_dict().items()}
        for name in dict.fromkeys([self.config.eval_dtype, self.config.dtype]):
            dtype = getattr(torch, name)
            self.potential.to(dtype)
            warm_up(self.potential.model, dtype)
        self.potential.load_state_dict(state)

    def loss_and_gradients(self, graph: AtomicGraph, species: torch.Tensor,
                           attention_edges: Optional[torch.Tensor], target: Dict[str, torch.Tensor],
                           scale: torch.Tensor):
        """``(loss, gradients)``: the batch's loss (0-d, detached) and its gradient for each trainable
        parameter (None for one the loss does not depend on); what torch.compile compiles. ``scale``
        (0-d) is an input rather than a constant of the graph, so that runs whose data give another
        output scale find the compiled code in the inductor cache."""
        out = self.potential(graph, compute_forces=self.forces, compute_stress=self.stress,
                             create_graph=self.forces or self.stress, species=species,
                             attention_edges=attention_edges)
        terms = loss_sums(out, target, scale, self.config, static_shapes=True)
        loss, _ = combine_loss(terms, {k: n for k, (_, n) in terms.items()}, self.config)
        gradients = torch.autograd.grad(loss, self.parameters, allow_unused=True)
        return loss.detach(), gradients

    def __call__(self, graph: AtomicGraph, target: Dict[str, torch.Tensor]) -> Optional[torch.Tensor]:
        if self.failure is None:
            species, attention_edges = eager_inputs(self.potential, graph, self.attention_cutoff)
            scale = torch.tensor(self.scale, dtype=graph.positions.dtype, device=graph.positions.device)
            try:
                from torch import _dynamo  # here, not at import: 1.5 s that only compiling needs

                with _dynamo.config.patch(trace_autograd_ops=True, fail_on_recompile_limit_hit=True), \
                        torch.fx.experimental._config.patch(use_duck_shape=False):
                    loss, gradients = self.compiled(graph, species, attention_edges, target, scale)
            except Exception as err:  # the compiler's failure; a genuine error repeats in the eager step
                self.failure = first_line(err)
                warnings.warn(f"torch.compile failed for the training step ({self.failure}); the steps run "
                              "eagerly from now on (same optimisation, eager speed)", CompileFallbackWarning,
                              stacklevel=2)
            else:
                for parameter, gradient in zip(self.parameters, gradients):
                    parameter.grad = gradient
                self.counts["compiled"] += 1
                return loss
        self.counts["eager"] += 1
        return None

    def epoch_record(self) -> Dict[str, object]:
        """What an epoch's record says of its steps: ``compiled_steps``, ``eager_steps`` and, after a
        failure, ``compile_failure`` (one line); the counts then start again for the next epoch."""
        record: Dict[str, object] = {"compiled_steps": self.counts["compiled"],
                                     "eager_steps": self.counts["eager"]}
        if self.failure is not None:
            record["compile_failure"] = self.failure
        self.counts = {"compiled": 0, "eager": 0}
        return record
