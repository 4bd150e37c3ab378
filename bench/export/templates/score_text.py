"""Score a text file with this folder's model, as ``bench eval --streams 1`` scores a split: with transformers
alone (``bench`` need not be installed).

    python score_text.py FOLDER TEXT_FILE [--chunk N]

The text is read as bytes (undecodable ones kept), encoded with ``<bos>`` first, and fed ``chunk`` tokens at a
time (the folder's ``eval_chunk`` unless given), the model's state carried from chunk to chunk: a recurrent model's
LSTM states and attention memory, a Transformer's window of previous tokens. Every token is predicted once, the
first from ``<bos>``. Prints JSON: the total negative log-likelihood in nats, the tokens, bytes and characters, and
bits per byte and per character.
"""

from __future__ import annotations

import argparse
import json
import math

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer


@torch.no_grad()
def score(folder: str, text: str, chunk: int | None = None) -> dict:
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True, dtype=torch.float32).eval()
    ids = tokenizer(text)["input_ids"]
    if ids[:1] != [model.config.bos_token_id]:
        raise SystemExit(f"the tokenizer does not start an encoding with <bos> ({model.config.bos_token_id})")
    chunk = chunk or model.config.eval_chunk
    inputs, targets = torch.tensor([ids[:-1]]), torch.tensor([ids[1:]])
    total, state = torch.zeros((), dtype=torch.float64), None
    for start in range(0, inputs.shape[1], chunk):
        out = model(inputs[:, start:start + chunk], state=state)
        state = out.state
        nll = F.cross_entropy(out.logits[0], targets[0, start:start + chunk], reduction="none")
        total += nll.sum(dtype=torch.float64)
    n_bytes = len(text.encode("utf-8", "surrogateescape"))
    bits = total.item() / math.log(2)
    return {"total_nll_nats": total.item(), "tokens": len(ids) - 1, "bytes": n_bytes, "chars": len(text),
            "bits_per_byte": bits / n_bytes, "bits_per_char": bits / len(text)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("text_file")
    parser.add_argument("--chunk", type=int, default=None, help="tokens per forward pass (default: the folder's)")
    args = parser.parse_args()
    with open(args.text_file, "rb") as handle:
        text = handle.read().decode("utf-8", "surrogateescape")
    print(json.dumps(score(args.folder, text, args.chunk), indent=2))


if __name__ == "__main__":
    main()
