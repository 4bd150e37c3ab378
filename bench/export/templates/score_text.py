"""Score a text file with this folder's model as bench scored the splits of its model card: with transformers
alone (``bench`` need not be installed).

    python score_text.py FOLDER TEXT_FILE [--streams S] [--chunk N]

The text is read as bytes (undecodable ones kept) and encoded. Its tokens are cut into ``streams`` contiguous,
nearly equal pieces scored side by side (a batch), each from ``<bos>`` with a fresh state, and fed ``chunk`` tokens
at a time, the model's state carried from chunk to chunk: a recurrent model's LSTM states and attention memory, a
Transformer's window of previous tokens (``chunk`` is its stride). Every token is predicted once. The defaults are
the layout the card's figures were scored in (``eval_streams`` and ``eval_chunk`` in config.json): given a split's
file, this prints the card's bits per byte for it. ``--streams 1`` scores the text as one piece, every token with
all the text before it (``bench eval --streams 1``).

The folder is checked first: every tensor of the model must come from ``model.safetensors``, and their sha256 must
be the one the export recorded (``weights_sha256`` in config.json, the weights the card's figures scored). A
damaged folder, a layout that cannot score the text, or a total that is not a number is refused in one line
(``error: ...``, exit status 1). Prints JSON: the total negative log-likelihood in nats, the tokens, bytes and
characters, words and lines, every comparable metric of the toolkit (bits per byte and per character, word
perplexity, and any a plug-in declared, from the copy of the toolkit's metrics beside the model), and the layout.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import sys

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from transformers import AutoModelForCausalLM, AutoTokenizer

PREFIX = "model."  # the family's module inside the transformers model (BenchForCausalLM.model)
FIX = "the folder is damaged: download or export it again"


class Refused(Exception):
    """A folder or a layout this script cannot score with, in one line."""


def weights_digest(state_dict: dict) -> str:
    """The sha256 of a model's tensors: their names, dtypes, shapes and bytes, as bench records it for the weights
    a result scored (bench.engine.run.weights_digest)."""
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def load(folder: str):
    """The folder's tokenizer and model, its weights checked to be whole and those it was exported with."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        # a tensor of another shape reported, as a missing one is, rather than raised with a report on stderr
        model, info = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True, dtype=torch.float32,
                                                           output_loading_info=True, ignore_mismatched_sizes=True)
    except (OSError, SafetensorError) as exc:  # a file missing, truncated or not safetensors
        raise Refused(f"{folder} cannot be loaded ({str(exc).splitlines()[0]}); {FIX}") from None
    for key, problem in (("missing_keys", "lacks tensors of the model, which transformers would make up"),
                         ("mismatched_keys", "holds tensors of other shapes than the model's"),
                         ("unexpected_keys", "holds tensors the model does not have")):
        if info.get(key):
            names = sorted(str(name[0] if isinstance(name, tuple) else name) for name in info[key])
            raise Refused(f"{folder}/model.safetensors {problem} ({len(names)}: {', '.join(names[:3])}); {FIX}")
    recorded = getattr(model.config, "weights_sha256", None)
    loaded = weights_digest({name.removeprefix(PREFIX): t for name, t in model.state_dict().items()})
    if not isinstance(recorded, str):
        raise Refused(f"{folder}/config.json records no weights_sha256, the sha256 of the weights it was exported "
                      f"with; {FIX}")
    if loaded != recorded:
        raise Refused(f"the weights in {folder} (sha256 {loaded[:12]}...) are not those it was exported with "
                      f"(config.json: {recorded[:12]}...): model.safetensors was edited or damaged; {FIX}")
    return tokenizer, model.eval()


def layout_value(given: int | None, config, key: str, option: str) -> int:
    """A layout setting: the one given, else config.json's; a positive whole number either way."""
    value = given if given is not None else getattr(config, key, None)
    where = option if given is not None else f"config.json's {key}"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Refused(f"{where} is {value!r}, not a positive number of tokens; give {option} N (the model card "
                      f"names the layout its figures were scored in)")
    return value


def stream_bounds(n: int, streams: int) -> list[tuple[int, int]]:
    """n tokens cut into ``streams`` contiguous, nearly equal pieces (bench.engine.score.evaluation's)."""
    base, extra = divmod(n, streams)
    bounds, start = [], 0
    for k in range(streams):
        bounds.append((start, start + base + (1 if k < extra else 0)))
        start = bounds[-1][1]
    return bounds


@torch.no_grad()
def score(folder: str, text: str, chunk: int | None = None, streams: int | None = None) -> dict:
    tokenizer, model = load(folder)
    chunk = layout_value(chunk, model.config, "eval_chunk", "--chunk")
    streams = layout_value(streams, model.config, "eval_streams", "--streams")
    window = getattr(model.config, "window", None)
    if window is not None and chunk > window:
        raise Refused(f"--chunk {chunk} is longer than the model's window ({window}): it is the stride of the "
                      f"window; give at most {window}")
    ids = tokenizer(text)["input_ids"]
    bos = model.config.bos_token_id
    if ids[:1] != [bos]:
        raise Refused(f"the tokenizer does not start an encoding with <bos> ({bos}); {FIX}")
    ids = ids[1:]
    if not ids:
        raise Refused("the text has no tokens to score; give a text file that is not empty")
    if streams > len(ids):
        raise Refused(f"--streams {streams} is more than the text's {len(ids)} tokens; give at most {len(ids)}")
    bounds = stream_bounds(len(ids), streams)
    longest = max(b - a for a, b in bounds)
    inputs = torch.full((streams, longest), bos, dtype=torch.long)  # each piece from <bos>
    targets = torch.full((streams, longest), -100, dtype=torch.long)  # -100: padding, not scored
    for row, (a, b) in enumerate(bounds):
        inputs[row, 1:b - a] = torch.tensor(ids[a:b - 1], dtype=torch.long)
        targets[row, :b - a] = torch.tensor(ids[a:b], dtype=torch.long)
    total, state = torch.zeros((), dtype=torch.float64), None
    for start in range(0, longest, chunk):
        out = model(inputs[:, start:start + chunk], state=state)
        state = out.state
        y = targets[:, start:start + chunk]
        nll = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), y.reshape(-1), ignore_index=-100,
                              reduction="none")
        total += nll.sum(dtype=torch.float64)
    if not math.isfinite(total.item()):
        raise Refused(f"the total negative log-likelihood is {total.item()}, not a number: the model's "
                      f"probabilities are not finite (NaN or infinite weights); {FIX}")
    # every comparable metric the toolkit declared, from the copy of its code beside the model's (bench_family.py)
    metrics = importlib.import_module(type(model).__module__.rpartition(".")[0] + ".bench_metrics")
    numbers = metrics.normalize(total.item(), text, len(ids))
    return {"total_nll_nats": total.item(), "tokens": len(ids), "bytes": numbers["n_bytes"],
            "chars": numbers["n_chars"], "words": numbers["n_words"], "lines": numbers["n_lines"],
            **{key: numbers[key] for key, metric in metrics.METRICS.items() if metric.comparable},
            "layout": {"streams": streams, "chunk": chunk}}


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):
        self.exit(2, f"error: {message} (see --help)\n")


def main() -> None:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("text_file")
    parser.add_argument("--streams", type=int, default=None, help="pieces scored side by side, each from <bos> "
                        "(default: the card's, config.json's eval_streams)")
    parser.add_argument("--chunk", type=int, default=None, help="tokens per forward pass, a Transformer's stride "
                        "(default: the card's, config.json's eval_chunk)")
    args = parser.parse_args()
    from transformers.utils import logging

    logging.disable_progress_bar()  # stderr holds nothing but an error's one line
    logging.set_verbosity_error()  # what its warnings say (tensors missing from the file) is checked here
    try:
        with open(args.text_file, "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape")
        print(json.dumps(score(args.folder, text, args.chunk, args.streams), indent=2))
    except Refused as exc:
        sys.exit(f"error: {exc}")
    except OSError as exc:  # a file that is not there or cannot be read
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
