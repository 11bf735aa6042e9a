"""torch.compile for a potential's network, with a warned fall-back to eager execution.

Only the energy network (``potential.model``) is compiled, with dynamic shapes (atom and edge counts
change from call to call); the derivatives stay with autograd, which differentiates the compiled
graph (AOTAutograd builds its backward), so forces and stress are the first derivatives of the same
energy as in eager mode. The first call compiles (tens of seconds on a CPU); calls on structures of
another size may recompile once more (sizes 0 and 1 are specialised, the rest are symbolic).

A compilation that fails (no C compiler for the CPU backend, an operation the compiler does not
support, ...) does not stop the calculation: the call is repeated with the eager network, a
``CompileFallbackWarning`` names the problem in one line, and the network stays eager from then
on. The results are the same either way; only the speed differs.
"""

from __future__ import annotations

import types
import warnings

import torch

from mlip.potential import Potential


class CompileFallbackWarning(RuntimeWarning):
    """torch.compile failed for a network; it runs eagerly (same results, eager speed)."""


def first_line(err: BaseException, limit: int = 300) -> str:
    """``TypeName: first line of the message`` (at most ``limit`` characters)."""
    lines = str(err).strip().splitlines()
    text = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


class CompiledForward:
    """Replaces ``module.forward``: the compiled forward until it fails once, then the eager one.

    The compiled callable is created from the class's ``forward`` bound to ``module``, so the module's
    parameters, buffers and ``state_dict`` stay those of the eager module (checkpoints are unchanged).
    """

    def __init__(self, module: torch.nn.Module):
        self.module = module
        self.eager = types.MethodType(type(module).forward, module)
        self.compiled = torch.compile(self.eager, dynamic=True)
        #: why compilation failed (one line), or None while the compiled forward is used
        self.failure = None

    def __call__(self, *args, **kwargs):
        if self.failure is None:
            try:
                return self.compiled(*args, **kwargs)
            except Exception as err:  # the compiler's failure; a genuine error repeats eagerly below
                result = self.eager(*args, **kwargs)
                self.failure = first_line(err)
                warnings.warn(
                    f"torch.compile failed for {type(self.module).__name__} ({self.failure}); "
                    "running it eagerly (same results, eager speed)",
                    CompileFallbackWarning,
                    stacklevel=2,
                )
                return result
        return self.eager(*args, **kwargs)

    def __deepcopy__(self, memo):
        # Copied with its module (copy.deepcopy of a Potential): compile the copy afresh.
        copied = memo.get(id(self.module))
        if copied is None:
            raise TypeError("a compiled forward is copied together with its module, not alone")
        return CompiledForward(copied)


def compile_network(potential: Potential, dtype: torch.dtype) -> None:
    """Compile ``potential.model`` in place (see the module docstring); idempotent.

    With ``isolated_reference`` the isolated-atom energies are computed first, eagerly, and cached (the
    weights are frozen in a calculator), so a structure with no edges is never compiled for them."""
    if isinstance(potential.model.__dict__.get("forward"), CompiledForward):
        return
    if potential.isolated_reference:
        potential.per_element_offsets(dtype)  # fills the cache keyed on the weights' state
    warm_up(potential.model, dtype)
    potential.model.forward = CompiledForward(potential.model)


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


def is_compiled(potential: Potential) -> bool:
    """True while ``potential.model`` runs compiled (False before compile_network or after a fall-back)."""
    forward = potential.model.__dict__.get("forward")
    return isinstance(forward, CompiledForward) and forward.failure is None
