"""A language model trained with the tokenization benchmark (``bench``), for transformers' ``trust_remote_code``.

The model's own code sits beside this file (written by ``bench export``): ``bench_family.py`` names its family, and
the family's module and what it imports follow. Nothing here imports ``bench``: the folder loads where it is not
installed.

``forward(input_ids, state=None)`` returns the next-token logits and the model's ``state``: a recurrent model's
LSTM states (and the SHA-RNN's attention memory), a Transformer's window of previous tokens. Feed a long text in
chunks, passing each chunk's ``state`` to the next, and every token is scored with the context ``bench eval``
gives it (``score_text.py`` does exactly that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from .bench_family import FAMILY, FAMILY_CONFIG


class BenchConfig(PretrainedConfig):
    model_type = "bench"

    def __init__(self, family: str = "", family_config: dict | None = None, eval_chunk: int = 0,
                 window: int | None = None, **kwargs):
        self.family = family  # the toolkit's name of the model family
        self.family_config = dict(family_config or {})  # its settings dataclass, as bench trained it
        self.eval_chunk = eval_chunk  # tokens per forward pass when bench scored it (a window's stride)
        self.window = window  # a windowed model's context; None: recurrent (its state carries the whole past)
        self.vocab_size = self.family_config.get("vocab_size")
        super().__init__(**kwargs)


@dataclass
class BenchOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    state: Any = None


class BenchForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = BenchConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules: list[str] = []

    def __init__(self, config: BenchConfig):
        super().__init__(config)
        self.model = FAMILY(FAMILY_CONFIG(**config.family_config))
        self.post_init()

    def _init_weights(self, module) -> None:
        """Every weight comes from model.safetensors; the family initialises its own when built."""

    def get_input_embeddings(self):
        return self.model.embedding

    def forward(self, input_ids: torch.Tensor, state: Any = None, labels: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, logits_to_keep: int = 0, **kwargs) -> BenchOutput:
        """input_ids [batch, time] -> logits [batch, time, vocabulary] (float32; the last ``logits_to_keep``
        positions only, if given) and the state after the chunk. ``attention_mask`` must be all ones: the model
        reads every position (no padding)."""
        if attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError("this model reads every position: give unpadded input (an attention_mask of ones)")
        hidden, state = self.model(input_ids, state)
        if logits_to_keep:
            hidden = hidden[:, hidden.shape[1] - logits_to_keep:]
        with torch.autocast(hidden.device.type, enabled=False):  # the projection and softmax in float32, as bench
            logits = self.model.logits(hidden.float())
        loss = None
        if labels is not None:  # transformers' convention: labels are the inputs, shifted here
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                   ignore_index=-100)
        return BenchOutput(loss=loss, logits=logits, state=state)

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, **kwargs) -> dict:
        """generate() reads the sequence again at each step (no cache): slower than carrying the state, exact. A
        windowed model reads its last ``window`` tokens, the window ``bench sample`` slides over a long text: the
        next token after as many of the previous ones as the model sees, so any number of new tokens fits."""
        if self.config.window is not None:
            input_ids = input_ids[:, max(0, input_ids.shape[1] - self.config.window):]
        return {"input_ids": input_ids}
