"""A HuggingFace causal language model behind the study's model interface, so that ``bench eval-hf`` scores it
with the same evaluation as a trained run (bench.engine.score.evaluation).

Its state is the sliding window of previous tokens, as for the study's Transformer (``slide_window``); a forward
pass returns the float32 next-token logits of the new tokens only (``logits_to_keep``: the positions of the window
that overlap the previous chunk are not projected to the vocabulary), so ``logits`` is the identity (the scorer
takes them in float32).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.models.common import LanguageModel, State, slide_window


@dataclass(frozen=True)
class WindowConfig:
    context: int  # the window: the most positions one forward pass sees


class PretrainedLM(LanguageModel):
    config_class = WindowConfig
    carries_state_in_training = False
    window_setting = "context"
    marker = "D"
    linestyle = ":"

    def __init__(self, model: torch.nn.Module, window: int):
        super().__init__()
        self.inner = model
        self.config = WindowConfig(window)
        self.train(model.training)  # a module starts in training mode: the scorer would leave the model in it

    def forward(self, tokens: torch.Tensor, state: State = None) -> tuple[torch.Tensor, State]:
        window, new_state = slide_window(state, tokens, self.config.context)
        keep = tokens.shape[1]
        try:
            logits = self.inner(window, logits_to_keep=keep).logits
        except TypeError:  # a model without the argument projects every position
            logits = self.inner(window).logits[:, -keep:]
        return logits, new_state

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden

    def logits_width(self, hidden: torch.Tensor) -> int:
        return hidden.shape[-1]  # they are the logits already

    def embedding_params(self) -> int:
        return self.inner.get_input_embeddings().weight.numel()
