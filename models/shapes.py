"""The shapes of the tensors a model would store, found without allocating them.

A checkpoint's header says how to rebuild its network (architecture, hyperparameters, terms); a header
that asks for ``channels=10**6`` beside tensors of a few kilobytes would make :func:`create_model`
allocate terabytes before the stored tensors could show the header wrong. :func:`stored_shapes` builds
the network and its terms on PyTorch's ``meta`` device, where a tensor has a shape and no memory, and
stops as soon as the weights registered exceed a bound (a header asking for a million layers stops after
the first few hundred), so a checkpoint can be compared with its header before anything is allocated.
"""

from __future__ import annotations

import contextlib
from typing import Dict, Optional, Sequence, Tuple

import torch
from torch.nn.modules.module import (register_module_buffer_registration_hook,
                                     register_module_parameter_registration_hook)

from mlip.terms import build_terms, term_specs

__all__ = ["ModelTooLargeError", "stored_shapes"]


class ModelTooLargeError(ValueError):
    """The hyperparameters describe more weights than the bound given to :func:`stored_shapes`."""


@contextlib.contextmanager
def _element_bound(limit: Optional[int]):
    """Raise :class:`ModelTooLargeError` as soon as the parameters and buffers registered on any
    module (in this thread or another: the hooks are global, for the duration of the block) hold more
    than ``limit`` elements in all."""
    if limit is None:
        yield
        return
    total = 0

    def count(module, name, tensor):
        nonlocal total
        if tensor is not None:
            total += tensor.numel()
            if total > limit:
                raise ModelTooLargeError(f"more than {limit:,} numbers (reached at {name!r} of "
                                         f"{type(module).__name__}, shape {tuple(tensor.shape)})")

    handles = [register_module_parameter_registration_hook(count),
               register_module_buffer_registration_hook(count)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def stored_shapes(name: str, atomic_numbers: Sequence[int], cutoff: float, hyperparameters: dict, terms=None,
                  max_elements: Optional[int] = None) -> Dict[str, Tuple[int, ...]]:
    """Shapes of the tensors the network (keys ``model.…``) and the terms (``terms.…``) of a potential
    built by ``create_model(name, atomic_numbers, cutoff, terms=terms, **hyperparameters)`` would store,
    computed on the meta device (no memory is allocated for them).

    ``max_elements`` bounds the numbers all registered parameters and buffers (derived constants
    included) may hold: :class:`ModelTooLargeError` (a ValueError) beyond it, raised while building.
    ValueError/TypeError for an unknown architecture or hyperparameter, as :func:`create_model`.
    """
    from mlip.models import check_hyperparameters, get_architecture

    cls = get_architecture(name)
    hp = {**check_hyperparameters(name, hyperparameters), **hyperparameters}
    with _element_bound(max_elements), torch.device("meta"):
        network = cls(num_species=len(atomic_numbers), cutoff=float(cutoff), **hp)
        term_modules = build_terms(term_specs(terms), atomic_numbers, float(cutoff))
    shapes = {f"model.{key}": tuple(value.shape) for key, value in network.state_dict().items()}
    shapes.update({f"terms.{key}": tuple(value.shape) for key, value in term_modules.state_dict().items()})
    return shapes
