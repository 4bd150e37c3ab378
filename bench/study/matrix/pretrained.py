"""Pretrained models in a matrix: ``[[pretrained]]`` entries, scored as ``bench eval-hf`` scores them.

::

    [[pretrained]]
    model = "models/gpt2"        # a local folder saved with save_pretrained (relative to the config)
    name = "gpt2"                # the label in the report (default: the folder's name)
    dataset = ["wikitext-2"]     # default: every dataset of [axes]
    window = 1024                # these three: as bench eval-hf's options (defaults: the model's context,
    stride = 512                 #   half the window, 8)
    streams = 8
    trust_remote_code = true     # run the folder's own Python code (a Transformer exported by bench export);
                                 #   default false: such a folder is refused

Each entry and dataset is one run of the test split, in ``results/<matrix>/hf-<name>-<dataset>-<run id>``,
scored by the matrix process itself after the trained runs and skipped once its result is there. Its
cell has model and tokenizer ``hf:<name>``, preset and match ``pretrained`` and no seed; its result is of kind
``pretrained`` (bench.engine.result); the report shows it in the main table and the attack figure, apart from
the comparisons of trained runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from bench.errors import BenchError
from bench.run_files import run_folder_name
from bench.study.matrix.run_status import RunStatus

PRETRAINED = "pretrained"
ENTRY_KEYS = ("model", "name", "dataset", "window", "stride", "streams", "trust_remote_code")


@dataclass
class PretrainedRun:
    """One pretrained model on one dataset: what :func:`bench.study.matrix.runs_table.run_row` needs of a run."""

    name: str
    settings: "HFEvalSettings"  # noqa: F821 (bench.engine.score.hf_eval, imported when needed: it imports torch)
    status: RunStatus
    identity: "PretrainedIdentity | None" = None  # noqa: F821 (None: its data are missing)
    problem: str | None = None
    phase: str | None = None

    @property
    def run_id(self) -> str | None:
        return self.identity.run_id if self.identity else None

    @property
    def cell(self) -> dict:
        return {"model": f"hf:{self.name}", "preset": PRETRAINED, "tokenizer": f"hf:{self.name}",
                "dataset": self.settings.dataset, "seed": None, "match": PRETRAINED}

    @property
    def run_dir(self) -> Path | None:
        return Path(self.settings.out_dir) if self.run_id else None

    def row(self) -> dict:
        """The run as one line of the dry-run table."""
        return {**self.cell, "phase": "", "run": self.run_dir.name if self.run_dir else "-",
                "status": self.status.value, "problem": self.problem or ""}


def parse_entries(entries: object, path: Path, datasets: list[str]) -> list[dict]:
    """Check the [[pretrained]] tables of a config: each a model folder and valid options."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise BenchError(f"{path}: every [[pretrained]] must be a table (model = \"FOLDER\", ...)")
    if entries:
        from bench.engine.score.hf_eval import check_model_folder, windows
    parsed = []
    for entry in entries:
        unknown = sorted(set(entry) - set(ENTRY_KEYS))
        if unknown or not isinstance(entry.get("model"), str):
            raise BenchError(f"{path}: [[pretrained]] needs model = \"FOLDER\" and allows {', '.join(ENTRY_KEYS)}"
                             + (f"; unknown: {unknown}" if unknown else ""))
        trusted = entry.get("trust_remote_code", False)
        if not isinstance(trusted, bool):
            raise BenchError(f"{path}: [[pretrained]] trust_remote_code must be true or false, not {trusted!r}")
        try:
            folder = check_model_folder(path.parent / entry["model"], "[[pretrained]] model", trusted,
                                        "trust_remote_code = true in its [[pretrained]] entry")
        except BenchError as exc:
            raise BenchError(f"{path}: {exc}") from None
        name = entry.get("name", folder.name)
        if not isinstance(name, str) or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise BenchError(f"{path}: [[pretrained]] name {name!r} must use letters, digits, '-', '_' and '.'")
        wanted = entry.get("dataset", datasets)
        wanted = [wanted] if isinstance(wanted, str) else wanted
        if not isinstance(wanted, list) or not wanted or not all(isinstance(d, str) for d in wanted):
            raise BenchError(f"{path}: [[pretrained]] {name}: dataset must be a name or a list of names, not "
                             f"{entry.get('dataset')!r}")
        if len(set(wanted)) < len(wanted):
            raise BenchError(f"{path}: [[pretrained]] {name}: dataset lists a name twice ({', '.join(wanted)}); list "
                             f"each once")
        for key in ("window", "stride", "streams"):
            value = entry.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise BenchError(f"{path}: [[pretrained]] {name}: {key} must be a positive integer, not {value!r}")
        window, limit = entry.get("window"), declared_context(folder)
        if window or limit:  # else the model's tokenizer may state it: checked when it is loaded
            try:
                windows(window, entry.get("stride"), limit, prefix="")
            except BenchError as exc:
                raise BenchError(f"{path}: [[pretrained]] {name}: {exc}") from None
        parsed.append({**entry, "model": str(folder), "name": name, "dataset": list(wanted)})
    names = [e["name"] for e in parsed]
    if len(set(names)) < len(names):
        raise BenchError(f"{path}: two [[pretrained]] entries are named alike; give each a name")
    return parsed


def declared_context(folder: Path) -> int | None:
    """The context length a model's config.json states (read as JSON: no model is loaded to plan)."""
    import json

    from bench.engine.score.hf_eval import CONTEXT_FIELDS

    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    values = [config.get(k) for k in CONTEXT_FIELDS]
    return next((int(v) for v in values if isinstance(v, int) and v > 0), None)


def plan_pretrained(entries: list[dict], results_dir: Path, data_dir: Path) -> list[PretrainedRun]:
    """Every entry on each of its datasets, with its status on disk (its data missing: no_data)."""
    from bench.engine.score.hf_eval import HFEvalSettings, identify
    from bench.study.matrix.run_status import current_status

    runs = []
    for entry in entries:
        for dataset in entry["dataset"]:
            settings = HFEvalSettings(model_dir=entry["model"], dataset=dataset, split="test",
                                      stride=entry.get("stride"), window=entry.get("window"),
                                      streams=entry.get("streams", 8), data_dir=str(data_dir),
                                      trust_remote_code=entry.get("trust_remote_code", False))
            try:
                identity = identify(settings)
            except BenchError as exc:
                runs.append(PretrainedRun(entry["name"], settings, RunStatus.NO_DATA, problem=str(exc)))
                continue
            folder = results_dir / run_folder_name(["hf", entry["name"], dataset], identity.run_id)
            runs.append(PretrainedRun(entry["name"], replace(settings, out_dir=str(folder)),
                                      current_status(folder, identity.run_id), identity))
    return runs


def check_corpora(entries: list[dict], data_dir: Path) -> None:
    """An unknown corpus in a [[pretrained]] entry is an error of the config, refused before anything is planned
    (one not fetched yet is only no_data)."""
    from bench.data.corpora import REGISTRY
    from bench.data.manifest import is_user_corpus, unknown_corpus

    for entry in entries:
        for dataset in entry["dataset"]:
            if dataset not in REGISTRY and not is_user_corpus(data_dir, dataset):
                raise BenchError(f"[[pretrained]] {entry['name']}: {unknown_corpus(dataset, data_dir)}")


def score_pretrained(run: PretrainedRun) -> None:
    """Score one pretrained run, recording its outcome like a trained run's (status.json; failures go on)."""
    from bench.engine.score.hf_eval import evaluate_pretrained
    from bench.study.matrix.run_status import Attempt, failure_text, locked_record

    def attempt() -> Attempt:
        try:
            evaluate_pretrained(run.settings, run.identity, in_matrix=True)
            return Attempt(str(run.run_dir), RunStatus.DONE, run_id=run.run_id)
        except Exception as exc:  # a failed evaluation is recorded and the matrix goes on
            return Attempt(str(run.run_dir), RunStatus.FAILED, failure_text(exc), run.run_id)

    record = locked_record(run.run_dir, run.run_id, attempt)
    run.status, run.problem = record.status, record.error or None
