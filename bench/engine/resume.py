"""A training run's checkpoint.pt: what it saves so that a resumed run ends with the uninterrupted run's weights
(model, optimizer, loss scale, progress, every random state, the state carried between segments), and how a run
resumes from it. Files are written and read by bench.engine.checkpoint; ``trainer`` is bench.engine.trainer's.
"""

from __future__ import annotations

import torch

from bench.engine import checkpoint
from bench.engine.progress import Progress
from bench.errors import BenchError
from bench.models.common import select_state, state_to
from bench.run_files import CHECKPOINT


def save_training(trainer) -> None:
    """Every process takes part (the steps not yet read, the carried state and random states of all rows
    are gathered); the main one writes."""
    trainer.read_steps()
    trainer.progress.wall_seconds = trainer.wall_seconds()
    carried = state_to(trainer.ranks.gather_rows(trainer.state), "cpu")
    rng = trainer.ranks.gather_objects(checkpoint.rng_state(trainer.jitter))
    if not trainer.ranks.is_main:
        return
    payload = trainer.payload("training")
    payload.update(optimizer=trainer.optimizer.state_dict(), progress=trainer.progress.to_json(), rng=rng[0],
                   carried_state=carried)
    if trainer.scaler is not None:  # its scale and growth tracker: a resumed run scales as the uninterrupted one
        payload["grad_scaler"] = trainer.scaler.state_dict()
    if trainer.ranks.distributed:
        payload["rng_by_rank"] = rng
    checkpoint.save(trainer.out / CHECKPOINT, payload)


def resume_training(trainer) -> bool:
    """Restore a run from its checkpoint.pt (False: there is none): weights, optimizer, loss scale, progress,
    random states and the carried state of this process's rows, and the log up to its step."""
    path = trainer.out / CHECKPOINT
    if not path.is_file():
        return False
    payload = checkpoint.load(path)
    if payload.get("run_id") != trainer.resolved.run_id():
        raise BenchError(f"{trainer.out} holds a checkpoint of a different run; choose another --out folder "
                         f"or delete {path}")
    rng_by_rank = payload.get("rng_by_rank", [payload.get("rng")])
    if len(rng_by_rank) != trainer.ranks.world:
        raise BenchError(f"{path} was written by {len(rng_by_rank)} process(es); resume it with as many")
    try:
        checkpoint.load_weights(trainer.model, payload["model"], path)
        trainer.optimizer.load_state_dict(payload["optimizer"])
        if trainer.scaler is not None:
            trainer.scaler.load_state_dict(payload["grad_scaler"])
        trainer.progress = Progress(**payload["progress"])
        checkpoint.restore_rng(rng_by_rank[trainer.ranks.rank], trainer.jitter)
        carried = select_state(payload["carried_state"], trainer.ranks.share(trainer.recipe.batch_size))
        trainer.state = state_to(carried, trainer.device)
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchError(f"{path} is not a complete checkpoint of this run ({type(exc).__name__}: {exc}); "
                         f"delete it to train the run from the start") from None
    trainer.wall_before = trainer.progress.wall_seconds
    trainer.run_log.keep_until(trainer.progress.step)
    _use_first_attempts_threads(trainer)
    return True


def _use_first_attempts_threads(trainer) -> None:
    """Another thread count splits the sums differently: the run would not end with the uninterrupted
    run's weights."""
    first, now = trainer.progress.threads, torch.get_num_threads()
    if first is None or first == now:
        trainer.progress.threads = now
        return
    torch.set_num_threads(first)
    if trainer.ranks.is_main:
        print(f"resuming with {first} CPU threads, as the run's first attempt (not {now}): the same sums, "
              f"the same weights", file=trainer.console, flush=True)
