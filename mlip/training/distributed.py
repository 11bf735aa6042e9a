"""The processes of a training run: several under torchrun, each with its share of every batch, or one
(whose collective operations then do nothing)."""

from __future__ import annotations

from typing import Dict

import torch


class Distributed:
    """torch.distributed when launched by torchrun (WORLD_SIZE > 1), else a single process."""

    def __init__(self, rank: int = 0, world_size: int = 1, owns_group: bool = False, device=None):
        self.rank, self.world_size, self.owns_group = rank, world_size, owns_group
        #: the device of this process: its own GPU (cuda:LOCAL_RANK) under torchrun with CUDA
        self.device = torch.device(device) if device is not None else torch.device("cpu")

    @classmethod
    def from_environment(cls, device: str) -> Distributed:
        import os

        import torch.distributed as td

        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls(device=device)
        cuda = str(device).startswith("cuda")
        if cuda:
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            device = f"cuda:{local}"
        owns = False
        if not td.is_initialized():
            td.init_process_group(backend="nccl" if cuda else "gloo")
            owns = True
        return cls(td.get_rank(), td.get_world_size(), owns, device)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world_size > 1:
            import torch.distributed as td

            td.barrier()

    def sum_counts(self, counts: Dict[str, float], keys) -> Dict[str, float]:
        if self.world_size == 1:
            return counts
        import torch.distributed as td

        t = torch.tensor([counts.get(k, 0.0) for k in keys], dtype=torch.float64, device=self.device)
        td.all_reduce(t)
        return {k: float(v) for k, v in zip(keys, t)}

    def sum_scalar(self, value: float) -> float:
        if self.world_size == 1:
            return value
        import torch.distributed as td

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        td.all_reduce(t)
        return float(t)

    def sum_gradients(self, module) -> None:
        if self.world_size == 1:
            return
        import torch.distributed as td

        for p in module.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            td.all_reduce(p.grad)

    def broadcast_flag(self, flag: bool) -> bool:
        if self.world_size == 1:
            return flag
        import torch.distributed as td

        t = torch.tensor([1 if flag else 0], device=self.device)
        td.broadcast(t, src=0)
        return bool(t.item())

    def close(self) -> None:
        if self.owns_group:
            import torch.distributed as td

            td.destroy_process_group()
