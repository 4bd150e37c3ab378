"""An exported Transformer's ``generate()`` goes on past its window: 27 prompt tokens and 100 new ones through a
62-token window, in a Python where bench cannot be imported, give ``bench sample --top-k 1``'s greedy text, and at
every step the logits of the window ``bench sample`` slides (the last 62 tokens)."""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")  # the dev extra (make test) installs it

from bench.engine.run import train  # noqa: E402
from bench.engine.score.inference import load_model, sample  # noqa: E402
from bench.engine.spec import RunSpec  # noqa: E402
from bench.export.hf_folder import export_run  # noqa: E402
from tests.test_export_hf import SHARED, WITHOUT_BENCH, corpus, without_bench  # noqa: E402, F401

WINDOW, NEW = 62, 100
PROMPT = "the cat sat on the mat and"  # 26 bytes: 27 tokens with the start token
GENERATE = WITHOUT_BENCH + '''
import json, numpy, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, prompt, new = sys.argv[1], sys.argv[2], int(sys.argv[3])
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
out = model.generate(ids, max_new_tokens=new, do_sample=False, suppress_tokens=[tokenizer.bos_token_id],
                     output_logits=True, return_dict_in_generate=True)
numpy.save("logits.npy", torch.cat(out.logits).numpy())
with open("generated.json", "w") as handle:
    json.dump({"ids": out.sequences[0].tolist(), "prompt_tokens": ids.shape[1],
               "text": tokenizer.decode(out.sequences[0, ids.shape[1]:])}, handle)
'''


@pytest.fixture(scope="module")
def windowed(corpus, tmp_path_factory):
    """A byte Transformer with a 62-token window, trained briefly and exported: (run folder, exported folder)."""
    root = tmp_path_factory.mktemp("windowed")
    train(RunSpec(model="transformer", preset="tiny", tokenizer="byte", dataset="plain", seed=0,
                  overrides={**SHARED, "d_model": 16, "nheads": 2, "context": WINDOW}, data_dir=str(corpus[0]),
                  out_dir=str(root / "run")), show_progress=False)
    return root / "run", export_run(root / "run", root / "hf")


def sliding_logits(run, ids: list[int], first: int) -> np.ndarray:
    """bench's logits for each token of ``ids`` from position ``first`` on, fed one token at a time with the state
    (the window of previous tokens) carried, as ``bench sample`` feeds its new tokens."""
    loaded = load_model(run, "cpu")
    state, out = None, []
    with torch.no_grad():
        hidden, state = loaded.model(torch.tensor([ids[:first]]), state)
        for token in ids[first:]:
            out.append(loaded.model.logits(hidden[:, -1]).float())
            hidden, state = loaded.model(torch.tensor([[token]]), state)
    return torch.cat(out).numpy()


@pytest.mark.slow
def test_generate_slides_the_window_as_bench_sample_does(windowed, tmp_path):
    run, folder = windowed
    without_bench(tmp_path, GENERATE, str(folder), PROMPT, str(NEW))
    generated = json.loads((tmp_path / "generated.json").read_text())
    assert generated["prompt_tokens"] == 27 and len(generated["ids"]) == 27 + NEW > WINDOW
    assert generated["text"] == sample(run, PROMPT, max_tokens=NEW, top_k=1)[1]  # bench sample's greedy text
    ours = sliding_logits(run, generated["ids"], generated["prompt_tokens"])
    assert np.abs(np.load(tmp_path / "logits.npy") - ours).max() <= 1e-4
