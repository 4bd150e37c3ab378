"""``bench run-matrix``: a whole study from one TOML config.

A config names axes (``model``, ``tokenizer``, ``dataset``, ``seed``, the matching
rule ``match`` and any other spec field) and shared settings. Every point of
the grid becomes a :class:`~bench.spec.RunSpec` whose run id is a hash of the
resolved spec and the data's identity; its folder is
``results/<matrix>/<readable-name>-<run id>``. Finished runs are skipped,
interrupted ones resume, changed settings give new run ids (new folders, old
ones untouched). Failures (divergence, out of memory, errors) are recorded and
the matrix goes on. ``runs.csv`` is rewritten atomically after every run.

Config layout::

    [matrix]    name, description, match (default rule: "chars"), data_dir
    [axes]      model = [...], tokenizer = [...], dataset = [...], seed = [...], match = [...], <field> = [...]
    [budget]    chars = N (match = chars), tokens = N (match = tokens), steps = N (match = steps), epochs = x
    [context]   chars = N (match = chars), tokens = N (match = tokens or steps)
    [shared]    preset = "tiny", and any model or training field for every run
    [models.<model>]          fields for one model
    [tokenizers."<scheme>"]   fields for one tokenization
    [[include]] extra grids: tables of axis values (scalars or lists), added to the main grid
    [[phases]]  runs done one after another per cell (name, any field, init_from = "previous")
    [corpora.<name>]          a user corpus: train/valid/test paths (relative to the config), or
                              prefix_of = "<corpus>" with train_bytes, valid_bytes, test_bytes

Matching rules: ``chars`` gives every tokenization the same characters of
training text and of context (converted to tokens with each tokenizer's
characters per token); ``tokens`` the same number of tokens; ``steps`` the
same number of optimizer steps on segments of the same number of tokens.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import itertools
import json
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.fileio import write_json_atomic, write_text_atomic
from bench.userconfig import read_toml

MATCH_RULES = ("chars", "tokens", "steps")
CORE_AXES = ("model", "preset", "tokenizer", "dataset", "seed", "match")
TABLES = ("matrix", "axes", "budget", "context", "shared", "models", "tokenizers", "include", "phases", "corpora")
BUDGET_KEYS = ("chars", "tokens", "steps", "epochs")
CONTEXT_KEYS = ("chars", "tokens")
STATUS_FILE = "status.json"
RUNS_CSV = "runs.csv"
FAILED = ("failed", "diverged", "oom")


@dataclass
class MatrixConfig:
    name: str
    path: Path
    sha256: str
    description: str
    axes: dict[str, list]
    includes: list[dict[str, list]]
    budget: dict[str, Any]
    context: dict[str, Any]
    shared: dict[str, Any]
    per_model: dict[str, dict]
    per_tokenizer: dict[str, dict]
    phases: list[dict]
    data_dir: str | None
    default_match: str
    corpora: dict[str, dict] = field(default_factory=dict)


def _as_list(value) -> list:
    return list(value) if isinstance(value, list) else [value]


def _table(doc: dict, key: str, path: Path) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise BenchError(f"{path}: [{key}] must be a table")
    return value


def load_config(path: str | Path) -> MatrixConfig:
    path = Path(path)
    doc = read_toml(path)
    unknown = sorted(set(doc) - set(TABLES))
    if unknown:
        raise BenchError(f"{path}: unknown section(s) {unknown}; allowed: {', '.join(TABLES)}")
    meta = _table(doc, "matrix", path)
    name = meta.get("name") or path.stem
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise BenchError(f"{path}: matrix name {name!r} must use letters, digits, '-' and '_'")
    axes = {k: _as_list(v) for k, v in _table(doc, "axes", path).items()}
    for key in ("model", "tokenizer", "dataset"):
        if not axes.get(key):
            raise BenchError(f"{path}: [axes] needs a non-empty {key} list")
    default_match = meta.get("match", "chars")
    includes = []
    for entry in doc.get("include", []):
        if not isinstance(entry, dict):
            raise BenchError(f"{path}: every [[include]] must be a table of axis values")
        includes.append({k: _as_list(v) for k, v in entry.items()})
    phases = doc.get("phases", [])
    if not isinstance(phases, list) or not all(isinstance(p, dict) and p.get("name") for p in phases):
        raise BenchError(f"{path}: every [[phases]] needs a name")
    budget = _table(doc, "budget", path)
    context = _table(doc, "context", path)
    for table, keys, label in ((budget, BUDGET_KEYS, "budget"), (context, CONTEXT_KEYS, "context")):
        bad = sorted(set(table) - set(keys))
        if bad:
            raise BenchError(f"{path}: unknown [{label}] key(s) {bad}; allowed: {', '.join(keys)}")
    config = MatrixConfig(
        name=name, path=path, sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        description=str(meta.get("description", "")), axes=axes, includes=includes, budget=budget,
        context=context, shared=_table(doc, "shared", path), per_model=_table(doc, "models", path),
        per_tokenizer=_table(doc, "tokenizers", path), phases=phases, data_dir=meta.get("data_dir"),
        default_match=default_match, corpora=_corpora(doc, path),
    )
    for cell in expand(config):  # every cell must make a valid spec before anything runs
        for phase in config.phases or [None]:
            cell_spec(config, cell, phase, None)
    return config


def _corpora(doc: dict, path: Path) -> dict[str, dict]:
    corpora = {}
    for name, entry in _table(doc, "corpora", path).items():
        if not isinstance(entry, dict):
            raise BenchError(f"{path}: [corpora.{name}] must be a table")
        files = {"train", "valid", "test"}
        prefix = {"prefix_of", "train_bytes", "valid_bytes", "test_bytes"}
        if set(entry) == files:
            corpora[name] = {"files": {k: str(path.parent / v) for k, v in entry.items()}}
        elif set(entry) == prefix:
            corpora[name] = {"prefix_of": entry["prefix_of"],
                             "sizes": {s: entry[f"{s}_bytes"] for s in ("train", "valid", "test")}}
        else:
            raise BenchError(f"{path}: [corpora.{name}] needs either train, valid, test paths or prefix_of with "
                             f"train_bytes, valid_bytes, test_bytes")
    return corpora


def register_corpora(config: MatrixConfig, data_dir: Path) -> None:
    """Install the config's own corpora in the data folder (a no-op when they are already there)."""
    from bench.datastore import add_prefix_corpus, add_user_corpus

    for name, entry in config.corpora.items():
        if "files" in entry:
            add_user_corpus(name, entry["files"], data_dir)
        else:
            add_prefix_corpus(name, entry["prefix_of"], entry["sizes"], data_dir)


# ------------------------------------------------------------------------------------------ the grid


def expand(config: MatrixConfig) -> list[dict]:
    """Every cell of the grid and of the [[include]] grids, in order, without duplicates."""
    cells, seen = [], set()
    for grid in [config.axes] + config.includes:
        keys = list(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            cell = dict(zip(keys, values))
            cell.setdefault("seed", 0)
            cell.setdefault("match", config.default_match)
            cell.setdefault("preset", config.shared.get("preset", "tiny"))
            key = json.dumps(cell, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                cells.append(cell)
    return cells


def _budget_overrides(config: MatrixConfig, match: str) -> dict:
    """Budget and context for one matching rule; presets' own budgets are switched off."""
    if match not in MATCH_RULES:
        raise BenchError(f"{config.path}: unknown match rule {match!r}; allowed: {', '.join(MATCH_RULES)}")
    b, c = config.budget, config.context
    out: dict[str, Any] = {"max_steps": None, "max_epochs": None, "max_train_chars": None, "max_tokens": None}
    need = {"chars": ("chars", "chars"), "tokens": ("tokens", "tokens"), "steps": ("steps", "tokens")}[match]
    if need[0] not in b and "epochs" not in b:
        raise BenchError(f"{config.path}: match = {match} needs [budget] {need[0]} = N")
    if match == "chars":
        out["max_train_chars"] = b.get("chars")
    elif match == "tokens":
        out["max_tokens"] = b.get("tokens")
    else:
        out["max_steps"] = b.get("steps")
    if "epochs" in b:
        out["max_epochs"] = b["epochs"]
    if need[1] == "chars":
        if "chars" not in c:
            raise BenchError(f"{config.path}: match = chars needs [context] chars = N (equal context in characters)")
        out["context_chars"] = c["chars"]
    else:
        if "tokens" not in c:
            raise BenchError(f"{config.path}: match = {match} needs [context] tokens = N")
        out["bptt"] = c["tokens"]
        out["context_chars"] = None
    return out


def cell_spec(config: MatrixConfig, cell: dict, phase: dict | None, init_from: str | None):
    from bench.spec import RunSpec, check_spec

    overrides: dict[str, Any] = {k: v for k, v in config.shared.items() if k != "preset"}
    overrides.update(_budget_overrides(config, cell["match"]))
    overrides.update(config.per_model.get(cell["model"], {}))
    overrides.update(config.per_tokenizer.get(cell["tokenizer"], {}))
    overrides.update({k: v for k, v in cell.items() if k not in CORE_AXES})
    if phase:
        overrides.update({k: v for k, v in phase.items() if k not in ("name", "init_from")})
        if phase.get("init_from") == "previous" and init_from:
            overrides["init_from"] = init_from
    spec = RunSpec(model=cell["model"], preset=cell["preset"], tokenizer=str(cell["tokenizer"]),
                   dataset=cell["dataset"], seed=int(cell["seed"]), overrides=overrides,
                   data_dir=config.data_dir)
    try:
        return check_spec(spec)
    except BenchError as exc:
        raise BenchError(f"{config.path}: cell {_cell_label(cell)}: {exc}") from None


def _cell_label(cell: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in cell.items())


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in str(text)).strip("-")


def run_folder_name(cell: dict, phase: dict | None, run_id: str) -> str:
    parts = [cell["model"], cell["preset"], str(cell["tokenizer"]).replace(":", ""), cell["dataset"],
             f"s{cell['seed']}", cell["match"]]
    parts += [f"{k}{v}" for k, v in cell.items() if k not in CORE_AXES]
    if phase:
        parts.append(phase["name"])
    return _safe("-".join(map(str, parts))) + f"-{run_id[:10]}"


# ------------------------------------------------------------------------------------------ planning


@dataclass
class PlannedRun:
    cell: dict
    phase: str | None
    spec: Any  # RunSpec
    run_dir: Path | None
    run_id: str | None
    status: str
    problem: str | None = None
    params_total: int | None = None
    params_non_embedding: int | None = None
    bptt: int | None = None
    train_tokens: float | None = None
    train_chars: float | None = None
    train_flops: float | None = None

    def row(self) -> dict:
        return {**self.cell, "phase": self.phase or "", "run": self.run_dir.name if self.run_dir else "-",
                "status": self.status, "params_total": self.params_total, "bptt": self.bptt,
                "train_tokens": self.train_tokens, "train_chars": self.train_chars, "train_flops": self.train_flops,
                "problem": self.problem or ""}


@dataclass
class _DataInfo:
    vocab_size: int
    chars_per_token: float
    train_tokens: int
    identity: dict


def _data_info(dataset: str, tokenizer: str, data_dir: Path, cache: dict) -> _DataInfo | str:
    """Vocabulary size, characters per token and data identity (trains/encodes through the cache)."""
    key = (dataset, tokenizer)
    if key not in cache:
        from bench.cache import encode_corpus
        from bench.metrics import text_counts
        from bench.train import data_identity

        try:
            encoded = encode_corpus(dataset, tokenizer, data_dir)
        except BenchError as exc:
            cache[key] = str(exc)
        else:
            n_chars = text_counts(encoded.splits["train"].read_text())["n_chars"]  # as train.prepare counts
            n_tokens = len(encoded.ids["train"])
            cache[key] = _DataInfo(encoded.tokenizer.vocab_size, n_chars / n_tokens, n_tokens,
                                   data_identity(encoded))
    return cache[key]


def _run_status(run_dir: Path, run_id: str) -> str:
    result = run_dir / "result.json"
    if result.is_file():
        data = json.loads(result.read_text())
        if data.get("run_id") == run_id and data.get("status") == "completed":
            return "done"
    status = run_dir / STATUS_FILE
    if status.is_file():
        state = json.loads(status.read_text()).get("status")
        if state in FAILED:
            return state
    if (run_dir / "checkpoint.pt").is_file():
        return "partial"
    return "new"


def plan(config: MatrixConfig, results_dir: Path, data_dir: Path) -> list[list[PlannedRun]]:
    """The runs of every cell (one list per cell: its phases in order)."""
    import torch

    from bench.models import build_model
    from bench.spec import resolve
    from bench.train import budget_tokens

    cache: dict = {}
    chains = []
    for cell in expand(config):
        chain, previous_dir = [], None
        for phase in config.phases or [None]:
            spec = cell_spec(config, cell, phase, str(previous_dir) if previous_dir else None)
            info = _data_info(spec.dataset, spec.tokenizer, data_dir, cache)
            phase_name = phase["name"] if phase else None
            if isinstance(info, str):
                chain.append(PlannedRun(cell, phase_name, spec, None, None, "no data", problem=info))
                previous_dir = None
                continue
            resolved = resolve(spec, info.vocab_size, info.chars_per_token, data=info.identity)
            run_id = resolved.run_id()
            run_dir = results_dir / run_folder_name(cell, phase, run_id)
            spec = dataclasses.replace(spec, out_dir=str(run_dir), data_dir=str(data_dir))
            with torch.device("meta"):
                model = build_model(spec.model, resolved.model_config)
            t = resolved.train
            tokens = budget_tokens(t, info.chars_per_token, info.train_tokens)
            chain.append(PlannedRun(
                cell, phase_name, spec, run_dir, run_id, _run_status(run_dir, run_id),
                params_total=model.num_params(), params_non_embedding=model.non_embedding_params(),
                bptt=t.bptt, train_tokens=tokens, train_chars=tokens * info.chars_per_token if tokens else None,
                train_flops=3 * model.flops_per_token(t.bptt) * tokens if tokens else None,
            ))
            previous_dir = run_dir
        chains.append(chain)
    return chains


# ------------------------------------------------------------------------------------------ running


def _classify(exc: BaseException) -> str:
    from bench.train import TrainingDiverged

    if isinstance(exc, TrainingDiverged):
        return "diverged"
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    return "failed"


def run_one(spec_json: dict, show_progress: bool, log_to_file: bool, threads: int | None = None) -> dict:
    """Train one run, catching failures; returns its status record (also written to status.json)."""
    from bench.spec import RunSpec
    from bench.train import TrainingInterrupted, train

    spec = RunSpec.from_json(spec_json)
    run_dir = Path(spec.out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if threads:
        import torch

        torch.set_num_threads(threads)
    record: dict[str, Any] = {"run_dir": str(run_dir)}
    stream = open(run_dir / "train.log", "a") if log_to_file else None
    saved = sys.stdout, sys.stderr
    try:
        if stream is not None:
            sys.stdout = sys.stderr = stream
        result = train(spec, show_progress=show_progress)
        record.update(status="completed", error="", run_id=result["run_id"])
    except TrainingInterrupted:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a failed run is recorded and the matrix goes on
        record.update(status=_classify(exc), error=f"{type(exc).__name__}: {exc}".splitlines()[0][:500])
        (run_dir / "error.txt").write_text(traceback.format_exc())
    finally:
        sys.stdout, sys.stderr = saved
        if stream is not None:
            stream.close()
    write_json_atomic(run_dir / STATUS_FILE, record)
    return record


def _run_chain(specs: list[dict], threads: int | None) -> list[dict]:
    records = []
    for spec_json in specs:
        record = run_one(spec_json, show_progress=False, log_to_file=True, threads=threads)
        records.append(record)
        if record["status"] != "completed":
            break  # a later phase needs this one's weights
    return records


def _init_worker(gpu_queue) -> None:
    if gpu_queue is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_queue.get())


@dataclass
class MatrixOutcome:
    config: MatrixConfig
    results_dir: Path
    chains: list[list[PlannedRun]]
    csv_path: Path | None = None
    counts: dict[str, int] = field(default_factory=dict)


def run_matrix(config_path: str | Path, results_dir: str | Path | None = None, jobs: int = 1,
               dry_run: bool = False, retry_failed: bool = False, data_dir: str | Path | None = None,
               show_progress: bool = True) -> MatrixOutcome:
    from bench.datastore import resolve_data_dir

    config = load_config(config_path)
    results = Path(results_dir) if results_dir else Path("results") / config.name
    data = resolve_data_dir(data_dir or config.data_dir)
    register_corpora(config, data)
    chains = plan(config, results, data)
    outcome = MatrixOutcome(config, results, chains)
    if dry_run:
        return outcome
    if jobs < 1:
        raise BenchError("--jobs must be at least 1")
    results.mkdir(parents=True, exist_ok=True)
    write_text_atomic(results / "matrix.toml", config.path.read_text())
    todo = []
    for chain in chains:
        pending = [r for r in chain if r.status in ("new", "partial") or (retry_failed and r.status in FAILED)]
        if pending and all(r.run_dir is not None for r in chain):
            todo.append(pending)
    print(f"{config.name}: {sum(len(c) for c in chains)} runs planned, {sum(len(c) for c in todo)} to run "
          f"({'in-process' if jobs == 1 else f'{jobs} at a time'})", file=sys.stderr)
    if jobs == 1:
        for k, pending in enumerate(todo, 1):
            for run in pending:
                print(f"[{k}/{len(todo)}] {run.run_dir.name}", file=sys.stderr)
                record = run_one(run.spec.to_json(), show_progress, log_to_file=False)
                run.status = "done" if record["status"] == "completed" else record["status"]
                write_runs_csv(outcome)
                if run.status != "done":
                    print(f"    {run.status}: {record['error']}", file=sys.stderr)
                    break
    else:
        _run_parallel(outcome, todo, jobs)
    outcome.csv_path = write_runs_csv(outcome)
    for chain in chains:
        for run in chain:
            outcome.counts[run.status] = outcome.counts.get(run.status, 0) + 1
    return outcome


def _run_parallel(outcome: MatrixOutcome, todo: list[list[PlannedRun]], jobs: int) -> None:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = mp.get_context("spawn")
    gpu_queue = None
    n_gpus = _cuda_device_count()
    if n_gpus > 1:
        gpu_queue = ctx.Queue()
        for k in range(jobs):
            gpu_queue.put(k % n_gpus)
    threads = max(1, (os.cpu_count() or 1) // jobs) if n_gpus == 0 else None
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                             initargs=(gpu_queue,)) as pool:
        futures = {pool.submit(_run_chain, [r.spec.to_json() for r in pending], threads): pending
                   for pending in todo}
        for future in as_completed(futures):
            pending = futures[future]
            try:
                records = future.result()
            except Exception as exc:  # the worker process itself died
                records = [{"status": "failed", "error": f"worker died: {exc}"}]
            for run, record in zip(pending, records):
                run.status = "done" if record["status"] == "completed" else record["status"]
                print(f"{run.run_dir.name}: {run.status} {record.get('error', '')}", file=sys.stderr)
            write_runs_csv(outcome)


def _cuda_device_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


# ------------------------------------------------------------------------------------------ runs.csv


def run_row(run: PlannedRun, config: MatrixConfig) -> dict:
    """One runs.csv row: axes, status, every metric and count, parameters, throughput, provenance."""
    from bench.metrics import normalize_counts

    row: dict[str, Any] = {k: run.cell.get(k) for k in CORE_AXES}
    row.update({k: v for k, v in run.cell.items() if k not in CORE_AXES})
    row.update(phase=run.phase or "", run_id=run.run_id or "", run_dir=run.run_dir.name if run.run_dir else "",
               status=run.status, error=run.problem or "", matrix=config.name, config_sha256=config.sha256)
    if run.run_dir is None:
        return row
    status = run.run_dir / STATUS_FILE
    if status.is_file():
        row["error"] = json.loads(status.read_text()).get("error", "")
    result_path = run.run_dir / "result.json"
    if run.status != "done" or not result_path.is_file():
        return row
    r = json.loads(result_path.read_text())
    t = r["training"]
    row.update(
        verified=r["data"]["verified"], comparable=r["comparable"],
        comparability_notes=" | ".join(r["comparability_notes"]),
        params_total=r["model"]["params_total"], params_non_embedding=r["model"]["params_non_embedding"],
        train_flops_per_token=r["model"]["train_flops_per_token"],
        tokenizer_hash=r["tokenizer"]["hash"], vocab_size=r["tokenizer"]["vocab_size"],
        chars_per_token=r["tokenizer"]["chars_per_token_train"],
        bptt=r["resolved"]["train"]["bptt"], context_chars=r["resolved"]["train"]["bptt"] * r["tokenizer"][
            "chars_per_token_train"],
        steps=t["steps"], train_tokens=t["tokens"], train_chars=t["chars"], epochs=t["epochs"],
        train_seconds=t["seconds"], train_chars_per_second=t["chars_per_second"], best_step=t["best_step"],
        eval_streams=r["evaluation"]["layout"]["streams"], eval_chunk=r["evaluation"]["layout"]["chunk"],
        eval_window=r["evaluation"]["layout"]["window"],
    )
    keys = list(normalize_counts(1.0, 1, 1, 1, 1, 1))
    for split, metrics in r["metrics"].items():
        for key in keys + ["eval_chars_per_second", "lossless"]:
            row[f"{split}_{key}"] = metrics.get(key)
    prov = r["provenance"]
    row.update(git_commit=prov["git"]["commit"], git_dirty=prov["git"]["dirty"], device=prov["device"]["type"],
               device_name=prov["device"].get("name", ""), torch=prov["device"].get("torch", ""),
               started_at=prov["started_at"], finished_at=prov["finished_at"], wall_seconds=prov["wall_seconds"])
    for split, info in r["data"]["splits"].items():
        row[f"data_sha256_{split}"] = info["sha256"]
        row[f"data_status_{split}"] = info["status"]
    return row


def write_runs_csv(outcome: MatrixOutcome) -> Path:
    rows = [run_row(run, outcome.config) for chain in outcome.chains for run in chain]
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = outcome.results_dir / RUNS_CSV
    outcome.results_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, buffer.getvalue())
    return path
