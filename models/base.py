"""What an energy model is: the interface :class:`mlip.Potential` calls and the registry checks.

An energy model is an ``nn.Module`` built as ``cls(num_species, cutoff, **hyperparameters)`` (every
hyperparameter a keyword argument with a default) and called as

    model(species, edge_index, edge_vectors, batch, n_graphs) -> energies

* ``species`` [N] long: each atom's index into the potential's species list (not its atomic number);
* ``edge_index`` [2, E] long: row 0 the centre atom i, row 1 its neighbor j (i ← j; no self edges);
* ``edge_vectors`` [E, 3] float: r_j − r_i + periodic shift (Å); they carry the gradient to positions
  and strain, so the model must be differentiable in them;
* ``batch`` [N] long: the structure of each atom; ``n_graphs``: the number of structures;
* ``energies`` [N], the dtype of ``edge_vectors``: per-atom energies before the potential's output scale,
  reference energies and declared terms (:mod:`mlip.terms`, :mod:`mlip.repulsion`).

A model may also declare:

* ``LEGACY_HYPERPARAMETERS`` (class attribute, dict): hyperparameters that checkpoints written before
  they existed lack, with the value that reproduces those checkpoints;
* ``invariant_rotations`` (property, [G, 3, 3] float64): rotations under which its energy is exactly
  invariant, for the exact-invariance tests (a model invariant under every rotation need not declare it);
* ``final_readout()``: the last layer of its readout, whose zeroing leaves the model's output zero
  (``init_embedded_atom_from`` zeroes it to start from a fitted term);
* ``attention_cutoff`` (float), ``uses_far_edges`` (bool) and ``FAR_EDGES_OPTION`` (class attribute,
  str): a radius shorter than the cutoff within which the network's attention works, whether the network
  itself uses the edges beyond it, and the option that makes it do so (``create_model`` refuses a shorter
  radius that nothing, network or term, uses the edges beyond).
"""

from __future__ import annotations

import inspect
from typing import Any, Dict

import torch
from torch import nn

#: the argument names of ``forward``, in order
FORWARD_ARGUMENTS = ("species", "edge_index", "edge_vectors", "batch", "n_graphs")


class EnergyModel(nn.Module):
    """Base class of the energy models (see the module docstring for the interface)."""

    #: hyperparameters checkpoints written before they existed lack → the value that reproduces them
    LEGACY_HYPERPARAMETERS: Dict[str, Any] = {}

    def forward(self, species: torch.Tensor, edge_index: torch.Tensor, edge_vectors: torch.Tensor,
                batch: torch.Tensor, n_graphs: int) -> torch.Tensor:
        """species [N], edge_index [2, E] (i ← j), edge_vectors [E, 3], batch [N], n_graphs → energies [N]."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward")


def check_energy_model(cls, name: str = "") -> None:
    """TypeError (one line, naming what is missing) unless ``cls`` has the interface of an energy model:
    an ``nn.Module`` subclass built from ``num_species`` and ``cutoff`` plus keyword arguments with
    defaults, whose ``forward`` takes ``(species, edge_index, edge_vectors, batch, n_graphs)``."""
    what = f"architecture {name!r} ({getattr(cls, '__name__', cls)!r})" if name else repr(cls)
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise TypeError(f"{what} is not an nn.Module class")
    if cls.forward is nn.Module.forward or cls.forward is EnergyModel.forward:
        raise TypeError(f"{what} defines no forward({', '.join(FORWARD_ARGUMENTS)})")
    params = list(inspect.signature(cls.forward).parameters)[1:]
    if tuple(params[:5]) != FORWARD_ARGUMENTS:
        raise TypeError(f"{what}: forward takes ({', '.join(params)}), not ({', '.join(FORWARD_ARGUMENTS)})")
    init = inspect.signature(cls.__init__).parameters
    missing = [k for k in ("num_species", "cutoff") if k not in init]
    if missing:
        raise TypeError(f"{what}: __init__ lacks the argument(s) {', '.join(missing)}")
    no_default = [k for k, p in init.items() if k not in ("self", "num_species", "cutoff")
                  and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is inspect.Parameter.empty]
    if no_default:
        raise TypeError(f"{what}: hyperparameter(s) {', '.join(no_default)} have no default")
    legacy = getattr(cls, "LEGACY_HYPERPARAMETERS", {})
    if not isinstance(legacy, dict):
        raise TypeError(f"{what}: LEGACY_HYPERPARAMETERS must be a dict, got {type(legacy).__name__}")
