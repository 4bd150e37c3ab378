"""One run on several processes (``torchrun --nproc-per-node N cli.py train ...``): who does what.

Every process trains on its share of the ``batch_size`` text streams with gradients
averaged by DistributedDataParallel, so N processes take the same steps as one process
with the same global batch (up to float error). Evaluation divides the streams among
the processes and sums their losses. Only the main process (rank 0) writes files.
``torchrun`` (or submitit's ``TorchDistributedEnvironment``) sets the environment
read here: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.distributed as dist

from bench.models.common import State


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @classmethod
    def from_env(cls) -> "Ranks":
        return cls(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                   int(os.environ.get("LOCAL_RANK", 0)))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def start(self) -> None:
        """Join the process group (gloo for CPU tensors, NCCL for CUDA ones)."""
        if self.distributed and not dist.is_initialized():
            backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend=backend, rank=self.rank, world_size=self.world)

    def share(self, n: int) -> slice:
        """This process's contiguous block of ``n`` items (blocks in rank order, sizes differing by at most 1)."""
        base, extra = divmod(n, self.world)
        start = self.rank * base + min(self.rank, extra)
        return slice(start, start + base + (1 if self.rank < extra else 0))

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def gather_objects(self, obj: Any) -> list:
        """``obj`` of every process, in rank order."""
        if not self.distributed:
            return [obj]
        gathered: list = [None] * self.world
        dist.all_gather_object(gathered, obj)
        return gathered

    def gather_rows(self, state: State) -> State:
        """A batch-first state of this process's rows as the state of all rows (rank order)."""
        if not self.distributed or state is None:
            return state
        if isinstance(state, torch.Tensor):
            parts = [torch.empty_like(state) for _ in range(self.world)]
            dist.all_gather(parts, state.contiguous())
            return torch.cat(parts, dim=0)
        return type(state)(self.gather_rows(s) for s in state)

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    @contextmanager
    def main_first(self) -> Iterator[None]:
        """The main process runs the block first (training tokenizers, filling caches), then the others."""
        if not self.is_main:
            self.barrier()
        yield
        if self.is_main:
            self.barrier()
