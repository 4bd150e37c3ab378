"""Where a run executes: device choice, mixed precision, and a description for provenance."""

from __future__ import annotations

import os

import torch

from bench.errors import BenchError


def pick_device(name: str = "auto", local_rank: int | None = None) -> torch.device:
    """``auto``: CUDA when present, else MPS, else CPU. With ``local_rank`` (one of several processes on a
    machine), CUDA means that process's own GPU."""
    if local_rank is not None and torch.cuda.is_available() and name in ("auto", "cuda"):
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps"):  # meta, xla, hpu parse but cannot train here
        raise BenchError(f"bad device {name!r}; use auto, cpu, cuda, cuda:N or mps")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchError("device cuda was asked for but no CUDA GPU is available; use --set device=cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise BenchError("device mps was asked for but is not available; use --set device=cpu")
    return device


def device_here(name: str) -> torch.device | None:
    """:func:`pick_device` at resolution: None for an accelerator this machine lacks (a run planned here for
    another machine's GPU is checked where it runs); a name that is no device is refused."""
    try:
        return pick_device(name)
    except BenchError:
        if name.split(":")[0] in ("cuda", "mps"):
            return None
        raise


def cuda_devices() -> int:
    """The GPUs this process sees (0 without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_threads(jobs: int = 1) -> int:
    """CPU threads for each of ``jobs`` runs at a time: ``$OMP_NUM_THREADS`` when the user set it, else this
    process's cores shared among the runs (at least one). Never the load: the thread count changes how sums are
    split, so a run's bits would depend on how busy the machine was when it started (the count is recorded in
    every result, and a resumed run takes its first attempt's)."""
    requested = os.environ.get("OMP_NUM_THREADS", "").strip()
    if requested.isdigit() and int(requested) > 0:
        return int(requested)
    return max(1, available_cores() // max(1, jobs))


THREADS_PER_CORE = 4  # beyond this, torch's thread pool only waits (5,000 threads on 2 cores hung; 100,000 crashed)


def check_threads(threads: int | None, what: str = "--threads") -> None:
    """At least one thread, and at most :data:`THREADS_PER_CORE` per core (``None``: the default)."""
    most = THREADS_PER_CORE * (os.cpu_count() or 1)
    if threads is not None and threads < 1:
        raise BenchError(f"{what} must be at least 1, not {threads}")
    if threads is not None and threads > most:
        raise BenchError(f"{what} {threads:,} is more than {THREADS_PER_CORE} per core of this machine's "
                         f"{os.cpu_count()}; give at most {most}")


def use_threads(threads: int | None) -> int:
    """Set torch's CPU threads (``None``: :func:`default_threads` of one run) and return the number."""
    chosen = threads or default_threads()
    torch.set_num_threads(chosen)
    return chosen


def configure(device: torch.device) -> None:
    """Fast defaults on CUDA: TF32 matrix products and cuDNN autotuning."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True


def describe(device: torch.device) -> dict:
    info = {"type": device.type, "torch": torch.__version__, "threads": torch.get_num_threads()}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        info.update(name=props.name, capability=f"{props.major}.{props.minor}",
                    memory_gb=round(props.total_memory / 2**30, 1), cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version())
    else:
        from bench.provenance import machine

        here = machine()
        info.update(name=here["cpu_model"], cpu_capability=here["torch_cpu_capability"])
    return info


def flatten_rnns(model: torch.nn.Module) -> None:
    """Put every cuDNN RNN's (LSTM, GRU, RNN) weights in one contiguous block (needed after moving to the GPU)."""
    for module in model.modules():
        if isinstance(module, torch.nn.RNNBase):
            module.flatten_parameters()
