"""A trained run inside lm-evaluation-harness: the registered model ``bench``.

    python -m bench.engine.score.lm_eval_model --model bench --model_args run=RUN_FOLDER --tasks TASK ...

(lm-eval's own command line, with this model registered first; a user error ends in one line ``error: ...``), or
from Python, once this module is imported: ``lm_eval.simple_evaluate(model="bench", model_args="run=RUN_FOLDER",
tasks=[...])``. ``model_args`` takes ``run`` (a run folder, a checkpoint file or a folder of ``bench export``) and
``device``, and ``plugins`` (plug-ins to import first, ``plugins=a.py:pkg.module``; installed ones need none). A device asked for (``device=`` in model_args, lm-eval's ``--device``, ``simple_evaluate(device=...)``)
is used or refused; none asked for (lm-eval's own command line asks ``cuda:0`` of every machine; :func:`main` asks
``auto``) is the run's own device, or the CPU, with a note, on a machine without an accelerator. lm-eval's batch
sizes change nothing: requests are scored one at a time.

Any family and tokenization serve ``loglikelihood_rolling`` (a document from ``<bos>``, as ``bench eval
--streams 1`` scores a split: one stream with the state carried through it, the Transformer's window sliding by
the run's evaluation chunk) and ``loglikelihood`` (a continuation after its context: the tokens of context +
continuation past those of the context alone, when the first begins with the second, else the two encoded apart);
text generation is not served. lm-eval's results have no field for a lossy tokenization, so a closed vocabulary
is told on stderr at load, and any other scheme at the first text it does not give back.

lm-eval's ``word_perplexity`` counts ``re.split(r"\\s+", doc)`` pieces, ``bench``'s ``len(doc.split())`` words: one
more per leading or trailing run of whitespace, so the two agree on a document that neither begins nor ends
with whitespace (``tests/test_lm_eval_model.py`` checks them within 1e-6).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch
import yaml
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import simple_parse_args_string

from bench.engine.checkpoint import locate
from bench.engine.exported import is_export
from bench.engine.hardware.device import device_here, pick_device
from bench.engine.score.evaluation import Scorer, run_layout
from bench.engine.score.inference import load_model
from bench.errors import USER_ERRORS, BenchError
from bench.plugins import load_plugins
from bench.run_files import BEST, SPEC

MODEL_ARGS = ("run", "device", "plugins")
UNCHOSEN = (None, "auto")  # the device nobody asked for: simple_evaluate passes none, main() passes auto
INCOMPARABLE = "not comparable with those of lossless tokenizations (lm-eval's results do not say so)"


@register_model("bench")
class BenchLM(LM):
    def __init__(self, run: str, device: str | None = None, plugins: str | None = None):
        super().__init__()
        load_plugins(str(plugins).split(os.pathsep) if plugins else [], where="model_args plugins")
        checkpoint, (where, on_cpu_instead) = _checkpoint(Path(str(run))), _device(device)
        self.loaded = loaded = load_model(checkpoint, where)
        if on_cpu_instead:
            print("note: no GPU on this machine: the bench model scores on the CPU", file=sys.stderr, flush=True)
        layout = run_layout(loaded.model, 1, loaded.train.bptt, loaded.train.eval_chunk, loaded.precision)
        self.scorer = Scorer(loaded.model, loaded.tokenizer.bos_id, layout, loaded.device, loaded.precision)
        self.lossy_told = not loaded.tokenizer.lossless_scheme
        if self.lossy_told:
            _warn(f"{loaded.tokenizer.spec.name} is a closed vocabulary: words outside it are scored as <unk>, so "
                  f"lm-eval's perplexities and bits per byte of this run are {INCOMPARABLE}")

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> "BenchLM":
        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None) -> "BenchLM":
        """lm-eval passes every model its batch_size, max_batch_size and device besides model_args (a collision
        for a constructor that took them all); only its device counts here."""
        unknown = sorted(set(arg_dict) - set(MODEL_ARGS))
        if unknown:
            raise BenchError(f"model_args {', '.join(unknown)}: the bench model takes only run=RUN_FOLDER, "
                             f"device=DEVICE and plugins=PLUGIN{os.pathsep}...; leave out the rest")
        if arg_dict.get("run") in (None, ""):
            raise BenchError("model_args gives no run: give --model_args run=RUN_FOLDER")
        ours, theirs = arg_dict.get("device"), (additional_config or {}).get("device")
        if ours not in UNCHOSEN and theirs not in UNCHOSEN and str(ours) != str(theirs):
            raise BenchError(f"two devices asked for: device={ours} in model_args and {theirs} to lm-eval "
                             f"(--device); give one")
        return cls(run=arg_dict["run"], device=theirs if ours in UNCHOSEN else ours, plugins=arg_dict.get("plugins"))

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        return [-self.scorer.score(self._encode(request.args[0])).total_nll_nats for request in requests]

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        answers = []
        for request in requests:
            context, continuation = request.args
            ids, first = self._pair(context, continuation)
            scored = self.scorer.score(ids, keep_token_nll=True, keep_greedy=True)
            answers.append((-float(scored.token_nll[first:].astype(np.float64).sum()),
                            bool(scored.token_greedy[first:].all())))
        return answers

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise BenchError("a task asks the bench model to generate text (generate_until); it only scores text: "
                         "choose loglikelihood or loglikelihood_rolling tasks (to sample from a run: bench sample)")

    def _encode(self, text: str) -> np.ndarray:
        tokenizer = self.loaded.tokenizer
        ids = np.asarray(tokenizer.encode(text), dtype=np.int64)
        if not self.lossy_told:
            report = tokenizer.loss_report(text, ids)
            if not report.lossless:  # a pretrained scheme that normalises: lossy on some texts only
                self.lossy_told = True
                _warn(f"{tokenizer.spec.name} does not give back a text lm-eval scored ({report.detail}), so "
                      f"lm-eval's perplexities and bits per byte of this run are {INCOMPARABLE}")
        return ids

    def _pair(self, context: str, continuation: str) -> tuple[np.ndarray, int]:
        """The tokens of context + continuation and where the continuation's begin."""
        before, whole = self._encode(context), self._encode(context + continuation)
        if len(whole) > len(before) and np.array_equal(whole[:len(before)], before):
            return whole, len(before)
        return np.concatenate([before, self._encode(continuation)]), len(before)


def _checkpoint(path: Path) -> Path:
    """The weights ``run=`` names: a checkpoint file, a run folder's best or an exported folder's (bench export); a
    results folder names its runs."""
    if path.is_file():
        return path
    if (path / BEST).is_file() or is_export(path):
        return locate(path)
    runs = sorted(child for child in path.iterdir() if (child / SPEC).is_file()) if path.is_dir() else []
    if runs:
        raise BenchError(f"{path} is a results folder, not a run: give one of its runs, e.g. run={runs[0]}")
    raise BenchError(f"no trained model at {path}: give run=RUN_FOLDER (with {BEST}), a folder of bench export or a "
                     f"checkpoint file")


def _device(asked: str | None) -> tuple[str, bool]:
    """The device to load on, and whether it is the CPU for want of an accelerator (see the module's text)."""
    if asked not in UNCHOSEN:
        here = device_here(str(asked))
        if here is None or (here.type == "cuda" and (here.index or 0) >= torch.cuda.device_count()):
            raise BenchError(f"device {asked} was asked for but this machine has no {asked}; give device=cpu "
                             f"in model_args (or lm-eval's --device cpu), or no device")
        return str(asked), False
    if pick_device("auto").type != "cpu":
        return "auto", False
    return "cpu", True


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def main() -> int:
    """lm-eval's command line with the model ``bench`` registered; a user error ends in one line, not a traceback."""
    from lm_eval._cli import HarnessCLI
    from lm_eval.utils import setup_logging

    setup_logging()
    parser = HarnessCLI()
    args = parser.parse_args()
    try:
        if _no_device_asked(args):
            args.device = "auto"  # lm-eval would fill in its default, cuda:0
        parser.execute(args)
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    return 0


def _no_device_asked(args) -> bool:
    """Whether lm-eval's command line runs the bench model with no device given, on it or in its --config file."""
    config = _config_file(args.config) if getattr(args, "config", None) else {}
    model = getattr(args, "model", None) or config.get("model")
    return model == "bench" and getattr(args, "device", "") is None and "device" not in config


def _config_file(path: str) -> dict:
    """lm-eval's --config file, read as lm-eval reads it (a YAML mapping), a problem in one line."""
    try:
        config = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise BenchError(f"--config {path}: {exc.strerror or exc}; give the YAML file of lm-eval's settings") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        raise BenchError(f"--config {path} is not valid YAML ({getattr(exc, 'problem', None) or 'unreadable'}"
                         f"{f', line {where.line + 1}' if where else ''}); fix the file") from None
    if not isinstance(config, dict):
        raise BenchError(f"--config {path} holds no settings (a YAML mapping such as 'model: bench'); fix the file")
    return config


if __name__ == "__main__":
    sys.exit(main())
