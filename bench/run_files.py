"""The files of a run folder, by name: one place for every layer that writes or reads them (the engine, the study,
the ownership checks), with nothing to import beside them.

A run trained here writes ``spec.json`` (its resolved configuration), ``tokenizer.json``, ``log.jsonl`` (the
learning curve), ``checkpoint.pt`` and ``best.pt``, ``result.json`` and, when asked, ``token_nll.<split>.npy``;
``run.lock`` is held while it trains. A matrix adds ``status.json`` (its outcome), ``cell.json`` (its place in the
matrix), ``train.log`` (a worker's output) and ``error.txt`` (a failure's traceback).
"""

SPEC = "spec.json"
TOKENIZER = "tokenizer.json"
LOG = "log.jsonl"
CHECKPOINT = "checkpoint.pt"
BEST = "best.pt"
RESULT = "result.json"
LOCK = "run.lock"
STATUS = "status.json"
CELL = "cell.json"
OTHER_DATA = "other_data"  # a finished run's cell record: why its data are not those its cell has now
MATRIX_CONFIG = "matrix.toml"  # the config a matrix last ran, copied into its results folder


def on_other_data(row) -> bool:
    """Whether a run's row (its cell record's fields) says it was trained on data files that changed since."""
    reason = row.get(OTHER_DATA)
    return isinstance(reason, str) and bool(reason)
TRAIN_LOG = "train.log"
ERROR = "error.txt"


def run_folder_name(parts: list, run_id: str) -> str:
    """A run's folder name, for every kind of run: its settings joined by ``-`` (letters, digits, ``-``, ``_`` and
    ``.`` only), then the first ten characters of its run id: another setting, another folder."""
    name = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in "-".join(map(str, parts))).strip("-")
    return f"{name}-{run_id[:10]}"


def token_losses(split: str) -> str:
    """Each evaluated token's NLL (nats), in text order (``dump_token_losses``)."""
    return f"token_nll.{split}.npy"


def document_losses(split: str) -> str:
    """Bits and bytes of each document of the split (``bench.study.matrix.records``): a run's text losses without its
    per-token array."""
    return f"documents.{split}.json"
