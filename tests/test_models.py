"""Model behaviour users rely on: causality, state carry, fidelity to the SHA-RNN reference, learning."""

import math

import pytest
import torch
import torch.nn.functional as F

from bench.models import build_model
from bench.models.lstm import LSTMConfig
from bench.models.sharnn import SHARNN, Boom, SHARNNConfig
from bench.models.transformer import TransformerConfig
from bench.optim import Lamb, lr_factor
from bench.spec import TrainConfig

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
    config = configs[name]
    for key, value in overrides.items():
        setattr(config, key, value)
    return build_model(name, config).double().eval()


MODELS = ["sha-rnn", "lstm", "transformer"]


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


def test_sharnn_parameter_count_formula():
    E, H, L, Vb = 1024, 4096, 4, 256
    block = 2 * E + (8 * E * E + 8 * E) + (E * H + H) + 4 * E  # LN, LSTM, Boom, two LNs
    attention = 4 * E + 3 * E + (E * E + E) + 2 * E + (2 * E * E + 2 * E)  # LNs, gates, query, its LN, over-param
    assert REFERENCE_FORWARD_PARAMS["second-last"] == L * block + attention + Vb * E + Vb


def test_sharnn_attention_placement():
    config = SHARNNConfig(vocab_size=V, emsize=16, nhid=64, nlayers=4, attention="second-last")
    assert [config.has_attention(i) for i in range(4)] == [False, False, True, False]
    model = SHARNN(config)
    assert [b.attention is not None for b in model.blocks] == [False, False, True, False]


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


def test_sharnn_memory_is_bounded():
    model = small("sha-rnn")
    tokens = torch.randint(0, V, (2, 100))
    state = None
    for start in range(0, 100, 20):
        _, state = model(tokens[:, start:start + 20], state)
    memories = state[1]
    assert all(m.shape[1] == 64 for m in memories)  # max_memory positions, no more


# --------------------------------------------------------------------------- causality and state carry


@pytest.mark.parametrize("name", MODELS)
def test_changing_a_later_token_never_changes_an_earlier_prediction(name):
    model = small(name)
    tokens = torch.randint(0, V, (2, 40))
    base = run_segments(model, tokens, [40])
    for k in (0, 17, 39):
        changed = tokens.clone()
        changed[:, k] = (changed[:, k] + 1) % V
        out = run_segments(model, changed, [40])
        assert torch.equal(out[:, :k], base[:, :k])
        assert not torch.allclose(out[:, k], base[:, k])


@pytest.mark.parametrize("name", ["sha-rnn", "lstm", "transformer"])
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


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("sizes", [[20, 20], [7, 13, 20], [1, 39]])
def test_segments_with_carried_state_equal_one_pass(name, sizes):
    model = small(name)
    tokens = torch.randint(0, V, (3, 40))
    whole = run_segments(model, tokens, [40])
    pieces = run_segments(model, tokens, sizes)
    assert torch.allclose(whole, pieces, atol=1e-10)


def test_transformer_sliding_window_keeps_at_most_context_tokens():
    model = small("transformer")
    tokens = torch.randint(0, V, (1, 200))
    state = None
    for start in range(0, 200, 16):
        _, state = model(tokens[:, start:start + 16], state)
        assert state.shape[1] <= 63
    # With a window, a token more than `context` back has no influence.
    a = run_segments(model, tokens, [16] * 12)
    changed = tokens.clone()
    changed[:, 0] = (changed[:, 0] + 1) % V
    b = run_segments(model, changed, [16] * 12)
    assert torch.equal(a[:, 100:], b[:, 100:])


# --------------------------------------------------------------------------- learning


OVERFIT = {
    "sha-rnn": (SHARNNConfig(vocab_size=V, emsize=16, nhid=64, nlayers=2, dropout=0.0, dropouth=0.0, dropouti=0.0),
                lambda p: Lamb(p, lr=1e-2)),
    "lstm": (LSTMConfig(vocab_size=V, emsize=48, nhid=96, nlayers=2, dropout=0.0, dropouth=0.0, dropouti=0.0),
             lambda p: torch.optim.AdamW(p, lr=1e-2)),
    "transformer": (TransformerConfig(vocab_size=V, d_model=16, nlayers=2, nheads=2, context=64, dropout=0.0),
                    lambda p: torch.optim.AdamW(p, lr=3e-3)),
}


@pytest.mark.parametrize("name", MODELS)
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


# --------------------------------------------------------------------------- optimizer and schedule


def test_lamb_matches_its_definition():
    torch.manual_seed(0)
    w = torch.randn(5, 3, requires_grad=True)
    w0 = w.detach().clone()
    opt = Lamb([w], lr=0.1, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.01, min_trust=0.25)
    m = torch.zeros_like(w0)
    v = torch.zeros_like(w0)
    ref = w0.clone()
    for _ in range(3):
        g = torch.randn(5, 3)
        w.grad = g.clone()
        opt.step()
        m = 0.9 * m + 0.1 * g
        v = 0.99 * v + 0.01 * g * g
        u = m / (v.sqrt() + 1e-6) + 0.01 * ref  # no bias correction
        trust = max(ref.norm().clamp(0, 10) / u.norm(), 0.25)
        ref = ref - 0.1 * trust * u
    assert torch.allclose(w.detach(), ref, atol=1e-6)


def test_lamb_trust_ratio_floor_and_weight_norm_clamp():
    w = torch.full((100,), 1e-4, requires_grad=True)  # tiny weights: the trust ratio would be ~1e-3
    w.grad = torch.ones(100)
    Lamb([w], lr=1.0, betas=(0.0, 0.0), eps=0.0, min_trust=0.25).step()
    # update u = g / |g| = 1 per element, |u| = 10; the floor makes the step 0.25 per element
    assert torch.allclose(w.detach(), torch.full((100,), 1e-4 - 0.25))
    big = torch.full((100,), 100.0, requires_grad=True)  # |w| = 1000, clamped to 10
    big.grad = torch.ones(100)
    Lamb([big], lr=1.0, betas=(0.0, 0.0), eps=0.0, min_trust=0.0).step()
    assert torch.allclose(big.detach(), torch.full((100,), 100.0 - 1.0))  # trust = 10 / 10


def test_zero_weights_get_trust_one():
    w = torch.zeros(4, requires_grad=True)
    w.grad = torch.ones(4)
    Lamb([w], lr=0.5, betas=(0.0, 0.0), eps=0.0, min_trust=0.25).step()
    assert torch.allclose(w.detach(), torch.full((4,), -0.5))


def test_learning_rate_schedule():
    cfg = TrainConfig(warmup_steps=10, schedule="constant", max_steps=100)
    assert lr_factor(1, 0.0, cfg) == pytest.approx(0.1)
    assert lr_factor(10, 0.1, cfg) == 1.0 and lr_factor(50, 0.5, cfg) == 1.0
    cos = TrainConfig(warmup_steps=0, schedule="cosine", min_lr_ratio=0.1, max_steps=100)
    assert lr_factor(1, 0.0, cos) == pytest.approx(1.0)
    assert lr_factor(50, 0.5, cos) == pytest.approx(0.55)
    assert lr_factor(100, 1.0, cos) == pytest.approx(0.1)
    lin = TrainConfig(warmup_steps=0, schedule="linear", min_lr_ratio=0.0, max_steps=100)
    assert lr_factor(30, 0.3, lin) == pytest.approx(0.7)
