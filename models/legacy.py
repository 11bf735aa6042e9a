"""Checkpoints of earlier layouts, brought to the present one when they are loaded.

* Before energy terms were declared beside the network (:mod:`mlip.terms`), a transformer carried the
  embedded-atom term itself, switched on by its hyperparameters ``embedded_atom`` and
  ``embedded_atom_log_densities``, with its tensors under ``model.embedded_atom.``: they become the term
  declaration ``{"embedded_atom": {"log_densities": ...}}`` (the term's other arguments were its
  defaults) and the keys ``terms.embedded_atom.``.
* Before :class:`mlip.nn.LogDensities` was a module, its tensors were attributes of the module using
  them (``log_density_weights``, ``log_density_in.weight``; :func:`mlip.nn.log_densities.rename_legacy_keys`).
"""

from __future__ import annotations

from typing import Dict, Tuple

from mlip.nn.log_densities import rename_legacy_keys

#: the hyperparameters that declared the embedded-atom term inside an architecture
LEGACY_TERM_HYPERPARAMETERS = ("embedded_atom", "embedded_atom_log_densities")


def upgrade_checkpoint(hyperparameters: dict, terms, tensors: Dict) -> Tuple[dict, object, Dict]:
    """(hyperparameters, terms, tensors) of a checkpoint in the present layout; those of a file already
    in it come back unchanged. ValueError for a file that declares the term both ways."""
    tensors = rename_legacy_keys(tensors)
    if not any(key in hyperparameters for key in LEGACY_TERM_HYPERPARAMETERS):
        return hyperparameters, terms, tensors
    if terms:
        raise ValueError("the header declares terms and the legacy hyperparameter embedded_atom both")
    hyperparameters = dict(hyperparameters)
    embedded_atom = hyperparameters.pop("embedded_atom", False)
    log_densities = hyperparameters.pop("embedded_atom_log_densities", False)
    if not embedded_atom:
        return hyperparameters, None, tensors
    old, new = "model.embedded_atom.", "terms.embedded_atom."
    tensors = {(new + key[len(old):] if key.startswith(old) else key): value for key, value in tensors.items()}
    return hyperparameters, {"embedded_atom": {"log_densities": bool(log_densities)}}, tensors
