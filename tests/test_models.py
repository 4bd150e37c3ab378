"""Model behaviour users rely on: causality, state carry, fidelity to the SHA-RNN reference, learning."""

import math

import pytest
import torch
import torch.nn.functional as F

from bench.engine.optim import Lamb
from bench.engine.presets import get_preset
from bench.models import MODELS, build_model, make_config
from bench.models.lstm import LSTMConfig
from bench.models.sharnn import SHARNN, Boom, SHARNNConfig, SingleHeadAttention
from bench.models.transformer import TransformerBlock, TransformerConfig

V = 50


def small(name: str, **overrides):
    torch.manual_seed(0)
    configs = {
        "sha-rnn": SHARNNConfig(vocab_size=V, emsize=16, nhid=64, nlayers=3, attention="all", dropout=0.1,
                                dropouth=0.1, dropouti=0.1, max_memory=64),
        "lstm": LSTMConfig(vocab_size=V, emsize=16, nhid=24, nlayers=2, dropout=0.1, dropouth=0.1, dropouti=0.1,
                           dropoute=0.1, wdrop=0.2),
        "transformer": TransformerConfig(vocab_size=V, d_model=16, nlayers=2, nheads=2, context=64, dropout=0.1),
    }
    # a family without a configuration here: its first (smallest) preset's
    config = configs[name] if name in configs else make_config(
        name, {**get_preset(name, next(iter(MODELS[name].presets)))["model"], "vocab_size": V})
    for key, value in overrides.items():
        setattr(config, key, value)
    return build_model(name, config).double().eval()


def run_segments(model, tokens, sizes):
    state, outs = None, []
    start = 0
    for size in sizes:
        hidden, state = model(tokens[:, start:start + size], state)
        outs.append(hidden)
        start += size
    return torch.cat(outs, dim=1)


# --------------------------------------------------------------------------- SHA-RNN fidelity

# Counted on the reference implementation itself (Smerity/sha-rnn model.py, apex's FusedLayerNorm replaced by a
# module with the same two parameters): vocabulary 256, emsize 1024, nhid 4096, 4 layers; one forward pass over
# two segments (the second with memory) and a backward pass; the count is of parameters that received a
# gradient. The reference's model.parameters() also holds 24,576 parameters that never take part (lnout, qkvs,
# r_gate, and for "none" the attention LayerNorms it builds anyway).
REFERENCE_FORWARD_PARAMS = {"second-last": 53_825_792, "all": 63_299_840, "none": 50_667_776}


@pytest.mark.parametrize("attention", ["second-last", "all", "none"])
def test_sharnn_parameter_count_equals_the_reference(attention):
    with torch.device("meta"):
        model = SHARNN(SHARNNConfig(vocab_size=256, emsize=1024, nhid=4096, nlayers=4, attention=attention))
    assert model.num_params() == REFERENCE_FORWARD_PARAMS[attention]


@pytest.mark.parametrize("attention, attention_blocks", [("second-last", 1), ("all", 3), ("none", 0)])
def test_sharnn_parameter_count_follows_the_architecture(attention, attention_blocks):
    Vb, E, H, L = 50, 32, 128, 3  # not the reference size, so that no dimension is a special case
    model = SHARNN(SHARNNConfig(vocab_size=Vb, emsize=E, nhid=H, nlayers=L, attention=attention))
    block = 2 * E + (8 * E * E + 8 * E) + (E * H + H) + 4 * E  # LN, LSTM, Boom, two LNs
    head = 4 * E + 3 * E + (E * E + E) + 2 * E + (2 * E * E + 2 * E)  # LNs, gates, query, its LN, over-param
    assert model.num_params() == L * block + attention_blocks * head + Vb * E + Vb  # tied embedding, output bias


@pytest.mark.parametrize("nlayers, placement", [(4, [False, False, True, False]), (1, [True])])
def test_sharnn_attention_placement(nlayers, placement):
    """Attention "second-last" means layer max(nlayers - 2, 0): one layer gets a head, where the reference has none."""
    config = SHARNNConfig(vocab_size=V, emsize=16, nhid=64, nlayers=nlayers, attention="second-last")
    assert [config.has_attention(i) for i in range(nlayers)] == placement
    model = SHARNN(config)
    assert [b.attention is not None for b in model.blocks] == placement


def test_sharnn_initialisation_follows_the_reference():
    model = SHARNN(SHARNNConfig(vocab_size=256, emsize=256, nhid=1024, nlayers=2))
    std = 0.1 / math.sqrt(256)
    assert model.embedding.weight.std().item() == pytest.approx(std, rel=0.05)
    assert model.blocks[0].boom.up.weight.std().item() == pytest.approx(std, rel=0.05)
    assert torch.all(model.blocks[0].boom.up.bias == 0)
    assert torch.all(model.blocks[0].input_norm.weight == 1)  # the reference's LayerNorms keep gain 1
    assert torch.all(model.blocks[0].attention.query_gate == 0)


def test_boom_sums_chunks_of_the_wide_vector():
    boom = Boom(4, 12, dropout=0.0).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    wide = boom.up(x)
    wide = wide * torch.sigmoid(1.702 * wide)
    expected = wide[..., 0:4] + wide[..., 4:8] + wide[..., 8:12]
    assert torch.allclose(boom(x), expected)


def test_sharnn_attention_as_matrix_products_equals_the_fused_call():
    """The CUDA path for wide heads (two matrix products) computes what scaled_dot_product_attention does."""
    torch.manual_seed(0)
    attention = SingleHeadAttention(512, dropout=0.0).double().eval()
    h, keys_values = torch.randn(2, 8, 512, dtype=torch.float64), torch.randn(2, 20, 512, dtype=torch.float64)
    mask = torch.cat([torch.ones(8, 12, dtype=torch.bool), torch.ones(8, 8, dtype=torch.bool).tril()], dim=1)
    q = torch.sigmoid(attention.query_gate) * attention.query_norm(attention.query(h))
    k = torch.sigmoid(attention.key_gate) * keys_values
    v = attention.value_gate_vector() * keys_values
    fused = attention(h, keys_values, mask)  # on the CPU: scaled_dot_product_attention
    assert torch.allclose(attention._matmul_attention(q, k, v, mask, 0.0), fused, atol=1e-12, rtol=0)


def states_along(model, tokens, size):
    """The state after each ``size``-token segment of ``tokens``."""
    state = None
    for start in range(0, tokens.shape[1], size):
        _, state = model(tokens[:, start:start + size], state)
        yield state


def test_sharnn_memory_is_bounded():
    *_, state = states_along(small("sha-rnn"), torch.randint(0, V, (2, 100)), 20)
    assert all(m.shape[1] == 64 for m in state[1])  # max_memory positions, no more


# --------------------------------------------------------------------------- causality and state carry


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("k", [0, 17, 39])
def test_changing_a_later_token_never_changes_an_earlier_prediction(name, k):
    model = small(name)
    tokens = torch.randint(0, V, (2, 40))
    base = run_segments(model, tokens, [40])
    changed = tokens.clone()
    changed[:, k] = (changed[:, k] + 1) % V
    out = run_segments(model, changed, [40])
    assert torch.equal(out[:, :k], base[:, :k])
    assert not torch.allclose(out[:, k], base[:, k])


@pytest.mark.parametrize("name", list(MODELS))
def test_causality_holds_across_segments(name):
    """In the second segment (after state/memory carry), a change at position k affects nothing before k."""
    model = small(name)
    tokens = torch.randint(0, V, (2, 48))
    base = run_segments(model, tokens, [24, 24])
    changed = tokens.clone()
    changed[:, 30] = (changed[:, 30] + 1) % V
    out = run_segments(model, changed, [24, 24])
    assert torch.equal(out[:, :30], base[:, :30])
    assert not torch.allclose(out[:, 30:], base[:, 30:])


def test_sharnn_memory_carries_information_between_segments():
    model = small("sha-rnn")
    tokens = torch.randint(0, V, (2, 48))
    base = run_segments(model, tokens, [24, 24])
    changed = tokens.clone()
    changed[:, 3] = (changed[:, 3] + 1) % V
    out = run_segments(model, changed, [24, 24])
    assert not torch.allclose(out[:, 24:], base[:, 24:])  # the first segment reaches the second


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("sizes", [[20, 20], [7, 13, 20], [1, 39]])
def test_segments_with_carried_state_equal_one_pass(name, sizes):
    model = small(name)
    tokens = torch.randint(0, V, (3, 40))
    whole = run_segments(model, tokens, [40])
    pieces = run_segments(model, tokens, sizes)
    assert torch.allclose(whole, pieces, atol=1e-10)


def test_transformer_sliding_window_keeps_exactly_the_context_before_a_chunk():
    model = small("transformer")  # context 64
    tokens = torch.randint(0, V, (1, 200))
    assert [state.shape[1] for state in states_along(model, tokens, 16)] == [16, 32, 48] + [63] * 10
    # A chunk of 16 sees the 48 tokens before it, no fewer and no more: each chunk equals one fresh forward pass
    # over exactly those 64 positions.
    segmented = run_segments(model, tokens, [16] * 12)
    for start in range(0, 192, 16):
        fresh, _ = model(tokens[:, max(0, start - 48):start + 16])
        assert torch.allclose(segmented[:, start:start + 16], fresh[:, -16:], atol=1e-12)
    # so a token more than `context` back has no influence
    changed = tokens.clone()
    changed[:, 0] = (changed[:, 0] + 1) % V
    assert torch.equal(segmented[:, 100:], run_segments(model, changed, [16] * 12)[:, 100:])


# --------------------------------------------------------------------------- learning


OVERFIT = {
    "sha-rnn": (SHARNNConfig(vocab_size=V, emsize=16, nhid=64, nlayers=2, dropout=0.0, dropouth=0.0, dropouti=0.0),
                lambda p: Lamb(p, lr=1e-2)),
    "lstm": (LSTMConfig(vocab_size=V, emsize=48, nhid=96, nlayers=2, dropout=0.0, dropouth=0.0, dropouti=0.0),
             lambda p: torch.optim.AdamW(p, lr=1e-2)),
    "transformer": (TransformerConfig(vocab_size=V, d_model=16, nlayers=2, nheads=2, context=64, dropout=0.0),
                    lambda p: torch.optim.AdamW(p, lr=3e-3)),
}


@pytest.mark.parametrize("name", list(OVERFIT))
def test_tiny_model_overfits_a_short_text(name):
    config, make_optimizer = OVERFIT[name]
    torch.manual_seed(0)
    model = build_model(name, config).train()
    optimizer = make_optimizer(model.parameters())
    text = torch.randint(0, V, (1, 33)).repeat(4, 1)
    for _ in range(300):
        hidden, _ = model(text[:, :-1])
        loss = F.cross_entropy(model.logits(hidden).reshape(-1, V), text[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1 * math.log(V)  # far below the uniform distribution's ln V nats


# --------------------------------------------------------------------------- checkpoints and compilation


COMPILED_PARTS = {"sha-rnn": {Boom, SingleHeadAttention}, "lstm": set(), "transformer": {TransformerBlock}}


@pytest.mark.parametrize("name", list(COMPILED_PARTS))
def test_compile_parts_compiles_exactly_the_named_module_types(name, monkeypatch):
    model = small(name)
    compiled = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda module, *args, **kwargs: compiled.append(module))
    model.compile_parts()
    expected = [m for m in model.modules() if type(m) in COMPILED_PARTS[name]]
    assert {type(m) for m in expected} == COMPILED_PARTS[name]  # the small model has every intended type
    assert [id(m) for m in compiled] == [id(m) for m in expected]


def test_a_compiled_sharnn_compiles_once_at_its_full_memory_and_never_again(monkeypatch):
    """While the memory fills, its length changes every segment: the compiled parts run eagerly then, and compile
    once, for the full memory (before: a static graph at the first segment, a dynamic one at the second).
    Recompiling is dynamo's decision (its guards), whatever the backend: a counting backend keeps this fast."""
    from torch._dynamo.testing import CompileCounter

    from bench.models.common import detach_state

    counter, compile_module = CompileCounter(), torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile", lambda module: compile_module(module, backend=counter))
    torch._dynamo.reset()
    model = small("sha-rnn", max_memory=40)
    model.compile_parts()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    state, compiled = None, []
    for _ in range(8):  # segments of 16: the memory holds 16, 32, then 40 positions (full) from the third
        hidden, new_state = model(torch.randint(0, V, (2, 16)), state)
        F.cross_entropy(model.logits(hidden).flatten(0, 1), torch.randint(0, V, (32,))).backward()
        optimizer.step()
        optimizer.zero_grad()
        state = detach_state(new_state)
        compiled.append(counter.frame_count)
    assert compiled[:2] == [0, 0] and compiled[2] > 0 and set(compiled[2:]) == {compiled[2]}

