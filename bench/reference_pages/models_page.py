"""The model-family reference: every family of ``bench.models.MODELS`` with its traits and presets, each preset
sized by ``bench models describe``'s own code (on the meta device: no weights are allocated)."""

from __future__ import annotations

from bench.data.facts import facts_for_sizing
from bench.engine.describe import describe_model
from bench.engine.spec import RunSpec
from bench.models import MODELS, family_kind
from bench.reference_pages.markdown import anchor, code, generated_from, heading, table, text


def models_page() -> str:
    facts = facts_for_sizing(None, None, None, None)  # the command's default: a vocabulary of bytes, no corpus
    parts = ["# Model families", generated_from("the family classes registered in `bench.models.MODELS`"),
             f"Parameters and FLOPs are those `bench models describe MODEL --preset PRESET` prints, at a vocabulary "
             f"of {facts.vocab_size} (bytes): a larger vocabulary adds its embedding rows to the parameters. "
             f"A preset's training recipe: `bench models describe MODEL --preset PRESET`."]
    for name, family in MODELS.loaded().items():
        traits = [f"- Kind: {text(family_kind(family))}",
                  f"- Figure marker {code(family.marker)}, line {code(family.linestyle)}",
                  "- Compiled with `compile=true`: " + (", ".join(code(t.__name__) for t in family.parts_to_compile)
                                                       or "nothing"),
                  f"- Settings: [model: {text(name)}](settings.md#{anchor('model: ' + name)})"]
        rows = []
        for preset in family.presets:
            info = describe_model(RunSpec(model=name, preset=preset), facts)
            rows.append([code(preset), f"{info['params_total']:,}", f"{info['params_non_embedding']:,}",
                         f"{info['flops_per_token_train']:,}",
                         text(", ".join(f"{k}={v}" for k, v in info["model_settings"].items()))])
        parts += [heading(2, name), "\n".join(traits),
                  table(["Preset", "Parameters", "Non-embedding", "Training FLOPs per token", "Model settings"], rows)
                  if rows else "No presets."]
    return "\n\n".join(parts) + "\n"
