"""The training loss: per-atom energy, force and stress errors (MSE, MAE or Huber), weighted.

Targets are divided by the output scale (eV), stresses multiplied by the volume per atom first, so the
three terms are per-atom energies. Sums and counts are kept apart so that several processes can add
their parts of a global batch before dividing. Each frame's terms are multiplied by its loss weights
(:func:`mlip.training.samples.loss_weights`, MACE's ``config_*_weight`` keys; 1 by default); the counts
are not, so a term is the mean over every frame (atom, stress row) of the batch, as in MACE.
"""

from __future__ import annotations

from typing import Dict

import torch

from mlip.training.config import TrainConfig


def _error_sum(diff: torch.Tensor, kind: str, delta: float,
               weight: torch.Tensor | None = None) -> torch.Tensor:
    """Σ weight · error(diff) (``weight`` broadcast against ``diff``; 1 when None)."""
    if diff.numel() == 0:
        return diff.new_zeros(())
    if kind == "mse":
        error = diff * diff
    elif kind == "mae":
        error = diff.abs()
    else:
        error = torch.nn.functional.huber_loss(diff, torch.zeros_like(diff), delta=delta, reduction="none")
    return (error if weight is None else error * weight).sum()


def loss_sums(out: Dict[str, torch.Tensor], target: Dict[str, torch.Tensor], scale: float,
              config: TrainConfig, static_shapes: bool = False):
    """Summed errors and their counts per term: ``{term: (sum, count)}``. Every target is divided
    by ``scale`` (eV); stresses are first multiplied by the volume per atom, so all three terms are
    per-atom energies. Sums (not means) let several processes add their parts of a global batch.

    The stress rows without a label (NaN target or no volume) are left out. ``static_shapes``: they
    are zeroed instead of dropped and the stress count is a tensor, so that no shape depends on the
    data (a compiled step, :mod:`mlip.training.compiled_step`): the same sum up to the order of its
    additions (exactly the same when every row has a label)."""
    lc = config.loss
    e = (out["energy"] - target["energy"]) / target["n_atoms"] / scale
    terms = {"energy": (_error_sum(e, lc.kind, lc.huber_delta, target.get("energy_weight")), e.numel())}
    if "forces" in target and "forces" in out and lc.forces_weight:
        d = (out["forces"] - target["forces"]) / scale
        weight = target.get("forces_weight")
        weight = None if weight is None else weight[:, None]
        terms["forces"] = (_error_sum(d, lc.kind, lc.huber_delta, weight), d.numel())
    if "stress" in out and lc.stress_weight:
        mask = torch.isfinite(target["stress"]).all(dim=1) & torch.isfinite(target["volume_per_atom"])
        weight = target.get("stress_weight")
        if static_shapes:
            # where() on both factors: an unlabelled row's NaN (target, volume, or a cell without
            # volume in ``out``) reaches neither the sum nor the gradient
            rows = mask[:, None]
            difference = torch.where(rows, out["stress"] - target["stress"], 0.0)
            ds = difference * torch.where(mask, target["volume_per_atom"], 0.0)[:, None] / scale
            count = 6 * mask.sum()
        else:
            ds = (out["stress"][mask] - target["stress"][mask]) * target["volume_per_atom"][mask, None] / scale
            count = ds.numel()
            weight = None if weight is None else weight[mask]
        weight = None if weight is None else weight[:, None]
        terms["stress"] = (_error_sum(ds, lc.kind, lc.huber_delta, weight), count)
    return terms


def combine_loss(terms, counts: Dict[str, float], config: TrainConfig):
    """Σ_term weight · sum / count (counts may be global over processes). Returns (loss, parts).

    A term of count 0 is left out; a count that is a tensor (``loss_sums(static_shapes=True)``)
    divides as at least 1 instead, which adds the same zero without a branch on the data."""
    lc = config.loss
    weights = {"energy": lc.energy_weight, "forces": lc.forces_weight, "stress": lc.stress_weight}
    parts = {k: terms[k][0] / (counts[k].clamp_min(1) if isinstance(counts[k], torch.Tensor) else counts[k])
             for k in terms if isinstance(counts.get(k), torch.Tensor) or counts.get(k, 0) > 0}
    total = sum(weights[k] * v for k, v in parts.items())
    if not isinstance(total, torch.Tensor):
        total = torch.zeros(())
    return total, parts


def loss_terms(out: Dict[str, torch.Tensor], target: Dict[str, torch.Tensor], scale: float, config: TrainConfig):
    """Weighted mean loss of one batch and its parts (see :func:`loss_sums`)."""
    terms = loss_sums(out, target, scale, config)
    return combine_loss(terms, {k: float(n) for k, (_, n) in terms.items()}, config)
