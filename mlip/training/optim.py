"""The optimiser of a run: AdamW over the trainable parameters, and the EMA of the weights."""

from __future__ import annotations

import torch

from mlip.training.config import TrainConfig
from mlip.training.ema import ExponentialMovingAverage


def make_optimizer(config: TrainConfig, potential):
    """AdamW (no weight decay on biases, norms and embeddings; frozen parameters left out) and the
    EMA of the weights. Returns (optimizer, ema)."""
    oc = config.optimizer
    decay, no_decay = [], []
    for pname, p in potential.named_parameters():
        if not p.requires_grad:
            continue  # frozen (freeze_embedded_atom)
        (no_decay if p.ndim < 2 or "embedding" in pname else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": oc.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=oc.lr, betas=tuple(oc.betas))
    return optimizer, ExponentialMovingAverage(potential, oc.ema_decay)
