"""An exported folder's README.md: the model card, every figure taken from the run's result."""

from __future__ import annotations

import shlex

from bench.data.corpora import REGISTRY
from bench.engine.result import RunResult
from bench.metrics import Metric
from tokenizers_study import read_scheme


def model_card(result: RunResult, provenance: dict, tokenizer_files: str, shown: list[Metric]) -> str:
    """The card; ``shown``: the comparable metrics of its table (those score_text.py prints)."""
    spec, model, tok, training = result.spec, result.model, result.tokenizer, result.training
    corpus = REGISTRY.get(result.data.corpus)
    licence = corpus.licence if corpus is not None and corpus.licence else \
        "not recorded (a corpus added by the user: its terms are its owner's)"
    commit = provenance["exported"]["toolkit"]
    trained_commit = result.provenance.git
    lines = [
        "---", "library_name: transformers", "pipeline_tag: text-generation",
        f"tags: [bench, {model.name}, {read_scheme(tok.scheme)[0].family}, {result.data.corpus}]", "---", "",
        f"# {model.name} on {result.data.corpus}, tokenized {tok.scheme}", "",
        f"A {model.name} language model trained with the tokenization benchmark (`bench`, run `{result.run_id}`), "
        f"exported with `bench export`. Load it with transformers alone:", "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "model = AutoModelForCausalLM.from_pretrained(FOLDER, trust_remote_code=True)",
        "tokenizer = AutoTokenizer.from_pretrained(FOLDER" + (", trust_remote_code=True" if tokenizer_files !=
                                                             "tokenizer.json" else "") + ")",
        "```", "",
        "`model(input_ids, state=state)` returns the logits and the model's `state` after the chunk: pass it to the "
        "next chunk to score a long text as `bench eval` does (`python score_text.py FOLDER TEXT_FILE` does exactly "
        "that, with transformers alone, in the layout of the results below unless told otherwise, after checking "
        "the weights). Encodings start with `<bos>`, the document start every text is scored from.",
        "", "## Model", "",
        f"- family: {model.name} (its code: `modeling_bench.py` and the files beside it)",
        f"- parameters: {model.params_total:,} ({model.params_non_embedding:,} outside the embedding)",
        f"- settings: {', '.join(f'{k}={v}' for k, v in provenance['resolved']['model'].items())}",
        f"- weights: `model.safetensors`, from the run's `{provenance['weights']['from']}`; sha256 of its tensors "
        f"`{result.evaluation.weights_sha256}`, that of the weights the results below scored",
        "", "## Tokenization", "",
        f"- scheme: `{tok.scheme}`, {tok.vocab_size:,} tokens, sha256 `{tok.hash}` (the file `bench_tokenizer.json`)",
        f"- in transformers: `{tokenizer_files}`" + ("" if tokenizer_files == "tokenizer.json" else
                                                    " (the scheme's own code: load it with trust_remote_code)"),
        f"- gives the text back: {_lossless(tok.lossless)}",
        "", "## Training data", "",
        f"- corpus: {result.data.corpus}, verified: {str(result.data.verified).lower()}",
        *[f"- {split}: `{s.file}`, {s.size:,} bytes, sha256 `{s.sha256}`, {s.status}"
          for split, s in result.data.splits.items()],
        f"- licence of the text: {licence}",
        "", "## Training budget", "",
        f"- preset `{spec.preset}`, seed {spec.seed}, settings: "
        + (", ".join(f"{k}={v}" for k, v in spec.overrides.items() if v is not None) or "the preset's"),
    ]
    if training is not None:
        flops = f", {training.flops:.3g} FLOPs" if training.flops else ""
        lines.append(f"- {training.steps:,} steps, {training.tokens:,} tokens, {training.chars:,.0f} characters "
                     f"({training.epochs:.3g} epochs){flops}, {training.seconds:,.0f} s")
    lines += ["", "## Results", "",
              "Every figure comes from one total negative log-likelihood over the exact text of the split "
              f"({result.evaluation.scored}; layout {_layout(result.evaluation.layout)}; weights "
              f"{result.evaluation.weights}):", "",
              "| split | " + " | ".join(metric.label for metric in shown) + " | tokens | comparable |",
              "|---|" + "---|" * (len(shown) + 2)]
    for split, metrics in result.metrics.items():
        lines.append(f"| {split} | " + " | ".join(f"{getattr(metrics, metric.key):.4f}" for metric in shown)
                     + f" | {metrics.n_tokens:,} | {str(result.comparable).lower()} |")
    lines += [*([""] + [f"- {note}" for note in result.comparability_notes] if result.comparability_notes else []),
              *reproduce(result),
              "", "## Provenance", "",
              f"- trained with the toolkit at commit `{trained_commit.get('commit')}`"
              f"{' (with uncommitted changes)' if trained_commit.get('dirty') else ''} on "
              f"{result.provenance.device.get('name') or result.provenance.device.get('type')}, finished "
              f"{result.provenance.finished_at}",
              f"- exported at commit `{commit.get('commit')}` on {provenance['exported']['at']}; the run's whole "
              f"record (configuration, data checksums, result) is `bench_run.json`",
              "- `bench eval FOLDER` scores this folder as the run's own weights, after checking the data files "
              "against the checksums above; `--set init_from=FOLDER` trains on from it", ""]
    return "\n".join(lines)


def reproduce(result: RunResult) -> list[str]:
    """The commands that give each figure of the table again, with transformers alone."""
    layout = result.evaluation.layout
    options = f"--streams {layout['streams']} --chunk {layout['chunk']}"
    lines = ["", "Each figure again, with transformers alone: `score_text.py` checks the weights against the sha256 "
             "above (recorded in `config.json` as `weights_sha256`), then scores the split's file (the path where the "
             "run read it; its sha256 is under Training data) in the same layout (these options are its defaults):",
             "", "```bash"]
    lines += [f"python FOLDER/score_text.py FOLDER {shlex.quote(result.data.splits[split].file)} {options}  # {split}: "
              f"{metrics.bits_per_byte:.6f} bits/byte" for split, metrics in result.metrics.items()
              if split in result.data.splits]
    lines.append("```")
    if layout.get("precision", "float32") != "float32":
        lines += ["", f"The figures were scored with the model's body in {layout['precision']}; `score_text.py` "
                      f"scores in float32, so the last digits may differ."]
    return lines


def _lossless(per_split: dict[str, bool]) -> str:
    return ", ".join(f"{split} {'exactly' if ok else 'not exactly (lossy)'}" for split, ok in per_split.items()) \
        or "not measured"


def _layout(layout: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in layout.items() if v is not None)
