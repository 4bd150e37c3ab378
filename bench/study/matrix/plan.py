"""The plan of a matrix: every cell resolved once into the run it will execute.

Each cell's spec (bench.study.matrix.grid) is resolved with its data's facts into a frozen
:class:`~bench.engine.resolve.ResolvedRun`; its folder is
``results/<matrix>/<readable-name>-<run id>``. The plan says, per run, its status on
disk (finished runs are skipped, interrupted ones resume, a changed setting is a new
run id and a new folder), its parameters, context in tokens and planned training
tokens, characters and FLOPs. A setting that cannot work is an error here, so
``--dry-run`` finds it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from bench.data.corpora import REGISTRY, UnknownCorpus
from bench.data.facts import DataFacts, load_data_facts
from bench.data.manifest import is_user_corpus, unknown_corpus
from bench.engine import checkpoint
from bench.engine.resolve import ResolvedRun, resolve
from bench.engine.spec import RunSpec
from bench.errors import BenchError
from bench.study.matrix.config import MatrixConfig
from bench.study.matrix.grid import cell_folder_name, cell_label, cell_spec, expand
from bench.study.matrix.run_status import RunStatus, current_status
from tokenizers_study import TokenizerError


@dataclass
class PlannedRun:
    cell: dict
    phase: str | None
    spec: RunSpec
    resolved: ResolvedRun | None  # None when the data are not there
    status: RunStatus
    problem: str | None = None
    params_total: int | None = None
    params_non_embedding: int | None = None
    train_tokens: float | None = None
    train_chars: float | None = None
    train_flops: float | None = None

    @property
    def run_dir(self) -> Path | None:
        return Path(self.resolved.spec.out_dir) if self.resolved else None

    @property
    def run_id(self) -> str | None:
        return self.resolved.run_id() if self.resolved else None

    def row(self) -> dict:
        """The run as one line of the dry-run table."""
        return {**self.cell, "phase": self.phase or "", "run": self.run_dir.name if self.run_dir else "-",
                "status": self.status.value, "vocab": self.resolved.data.vocab_size if self.resolved else None,
                "params_total": self.params_total,
                "bptt": self.resolved.train.bptt if self.resolved else None, "train_tokens": _whole(self.train_tokens),
                "train_chars": _whole(self.train_chars), "train_flops": self.train_flops, "problem": self.problem or ""}


def _whole(count: float | None) -> int | None:
    """A planned count of tokens or characters, as the whole number it is."""
    return None if count is None else round(count)


def plan(config: MatrixConfig, results_dir: Path, data_dir: Path) -> list[list[PlannedRun]]:
    """The runs of every cell (one list per cell: its phases in order)."""
    facts: dict[tuple[str, str], DataFacts | str] = {}
    chains = []
    for cell in expand(config):
        chain, previous_dir = [], None
        for phase in config.phases or [None]:
            spec = cell_spec(config, cell, phase, str(previous_dir) if previous_dir else None)
            key = (spec.dataset, spec.tokenizer)
            if key not in facts:
                try:
                    facts[key] = _facts_or_problem(spec, data_dir)
                except (TokenizerError, UnknownCorpus) as exc:
                    raise BenchError(f"{config.path}: cell {cell_label(cell)}: {exc}") from None
            run = _planned_run(config, cell, phase, spec, facts[key], results_dir, data_dir)
            chain.append(run)
            previous_dir = run.run_dir
        chains.append(chain)
    _each_run_once(config, [run for chain in chains for run in chain])
    return chains


def _each_run_once(config: MatrixConfig, runs: list[PlannedRun]) -> None:
    """Two cells that resolve to one run (16 and 16.0, a setting that changes nothing) would train it twice and
    count it as two seeds."""
    seen: dict[str, PlannedRun] = {}
    for run in runs:
        if run.run_id is None:
            continue
        if run.run_id in seen:
            raise BenchError(f"{config.path}: cells {cell_label(seen[run.run_id].cell)} and {cell_label(run.cell)} are "
                             f"the same run (run id {run.run_id[:10]}); list each setting once")
        seen[run.run_id] = run


def _facts_or_problem(spec: RunSpec, data_dir: Path) -> DataFacts | str:
    """The data's facts (training and encoding the tokenizer through the cache), or why the data are not
    there; an unknown corpus, or a tokenization that cannot be trained on it, is an error of the config."""
    if spec.dataset not in REGISTRY and not is_user_corpus(data_dir, spec.dataset):
        raise unknown_corpus(spec.dataset, data_dir)
    try:
        return load_data_facts(spec.dataset, spec.scheme, data_dir)
    except BenchError as exc:
        return str(exc)


def _planned_run(config: MatrixConfig, cell: dict, phase: dict | None, spec: RunSpec, facts: DataFacts | str,
                 results_dir: Path, data_dir: Path) -> PlannedRun:
    phase_name = phase["name"] if phase else None
    if isinstance(facts, str):
        return PlannedRun(cell, phase_name, replace(spec, data_dir=str(data_dir)), None, RunStatus.NO_DATA,
                          problem=facts)  # its spec names the data folder its data were looked for in
    try:
        resolved = resolve(spec, facts)
        if resolved.train.init_from and not (phase and phase.get("init_from") == "previous"):
            checkpoint.locate(resolved.train.init_from)  # weights named in the config must exist before anything runs
    except BenchError as exc:
        raise BenchError(f"{config.path}: cell {cell_label(cell)}: {exc}") from None
    run_dir = results_dir / cell_folder_name(cell, phase, resolved.run_id())
    resolved = resolved.with_spec(out_dir=str(run_dir), data_dir=str(data_dir))
    size = resolved.size()
    tokens = size.planned_tokens
    return PlannedRun(
        cell, phase_name, resolved.spec, resolved, current_status(run_dir, resolved.run_id()),
        params_total=size.params_total, params_non_embedding=size.params_non_embedding, train_tokens=tokens,
        train_chars=tokens * facts.chars_per_token if tokens else None,
        train_flops=size.flops_per_token_train * tokens if tokens else None,
    )
