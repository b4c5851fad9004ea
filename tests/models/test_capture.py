"""Capturing resid[k]: three independent paths agree bit for bit; batches, caches, masks, fc input."""


import pytest
import torch
from torch import nn

from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.capture import (
    ResidCapture,
    _offload_device,
    build_fc_input,
    capture_resid,
    fc_input_difference,
    hf_hidden_states,
    resid_modules,
)
from eagle3lab.models.target import TINY_ARCHS, tiny_target

PROMPTS = ["The quick brown fox jumps over the lazy dog.", "Draft", "Speculative decoding drafts a few tokens."]


@pytest.fixture(scope="module")
def targets():
    return {arch: tiny_target(arch, num_layers=4, seed=3) for arch in TINY_ARCHS}


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("arch", TINY_ARCHS)
def test_three_paths_agree_bit_for_bit(targets, arch, padding_side):
    target = targets[arch]
    n = target.num_layers
    batch = target.encode(PROMPTS, padding_side=padding_side)
    assert batch["attention_mask"].min() == 0  # really padded
    points = list(range(n + 1))
    pre = capture_resid(target, batch["input_ids"], points, batch["attention_mask"], method="pre")
    post = capture_resid(target, batch["input_ids"], points, batch["attention_mask"], method="post")
    auto = capture_resid(target, batch["input_ids"], points, batch["attention_mask"])
    hf = hf_hidden_states(target, batch["input_ids"], batch["attention_mask"])
    assert len(hf) == n + 1
    for k in range(n):
        assert torch.equal(pre[k], hf[k]), k
        assert torch.equal(post[k], hf[k]), k
        assert torch.equal(auto[k], hf[k]), k
    # resid[N]: the input of the final norm (pre) == the last layer's output (post).
    assert torch.equal(pre[n], post[n]) and torch.equal(auto[n], post[n])
    # HF's last entry is norm(resid[N]), not resid[N].
    with torch.no_grad():
        assert torch.equal(hf[n], target.final_norm(post[n]))
    assert not torch.allclose(hf[n], post[n])


def test_only_requested_points_are_kept(targets):
    target = targets["llama"]
    batch = target.encode(PROMPTS)
    with torch.no_grad(), ResidCapture(target, [1, 4]) as cap:
        target.model(**batch)
    assert sorted(cap.states) == [1, 4]
    b, t = batch["input_ids"].shape
    assert all(v.shape == (b, t, target.hidden_size) for v in cap.states.values())
    assert all(not v.requires_grad for v in cap.states.values())
    # Hooks are gone after the block: another forward records nothing.
    with torch.no_grad():
        target.model(**batch)
    assert cap.forwards == 1


def test_states_cleared_on_each_forward_and_cache_steps(targets):
    target = targets["qwen3"]
    ids = target.encode(PROMPTS[:1])["input_ids"]
    full = capture_resid(target, ids, [0, 2, 4])
    with torch.no_grad(), ResidCapture(target.model, [0, 2, 4]) as cap:
        out = target.model(ids[:, :5], use_cache=True)
        assert cap.states[2].shape[1] == 5
        target.model(ids[:, 5:], cache=out.past_key_values, use_cache=True)
    assert cap.forwards == 2
    assert cap.states[2].shape[1] == ids.shape[1] - 5
    for k in (0, 2, 4):
        torch.testing.assert_close(cap.states[k], full[k][:, 5:], rtol=0, atol=1e-5)


def test_custom_4d_mask_and_position_ids(targets):
    target = targets["llama"]
    ids = target.encode(PROMPTS[:1])["input_ids"]
    t = ids.shape[1]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))[None, None]
    full = capture_resid(target, ids, [1, 3])
    with torch.no_grad(), ResidCapture(target.model, [1, 3]) as cap:
        target.model(ids, attention_mask=causal, position_ids=torch.arange(t)[None])
    for k in (1, 3):
        torch.testing.assert_close(cap.states[k], full[k], rtol=0, atol=1e-6)


def test_padded_batch_matches_single_prompts(targets):
    target = targets["deepseek_v3"]
    batch = target.encode(PROMPTS, padding_side="left")
    states = capture_resid(target, batch["input_ids"], [0, 2, 4], batch["attention_mask"])
    for i, prompt in enumerate(PROMPTS):
        single = capture_resid(target, target.encode([prompt])["input_ids"], [0, 2, 4])
        length = single[0].shape[1]
        for k in (0, 2, 4):
            torch.testing.assert_close(states[k][i, -length:], single[k][0], rtol=1e-4, atol=1e-5)


class _TupleLayer(nn.Module):
    """A decoder layer in the transformers 4.x style: returns a tuple, state first."""

    def __init__(self, h):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(h, 2 * h), nn.SiLU(), nn.Linear(2 * h, h))

    def forward(self, hidden_states, attention_mask=None):
        return (hidden_states + self.mlp(hidden_states), None)


class _Stack(nn.Module):
    def __init__(self, vocab, h, n):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, h)
        self.layers = nn.ModuleList(_TupleLayer(h) for _ in range(n))
        self.norm = nn.LayerNorm(h)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        every = [hidden_states]
        for layer in self.layers:
            hidden_states = layer(hidden_states)[0]
            every.append(hidden_states)
        return self.norm(hidden_states), every


class _TupleLM(nn.Module):
    def __init__(self, vocab=50, h=16, n=3):
        super().__init__()
        self.config = type("Cfg", (), {"num_hidden_layers": n})()
        self.model = _Stack(vocab, h, n)

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def forward(self, input_ids):
        return self.model(input_ids)


@pytest.mark.parametrize("method", ["auto", "pre", "post"])
def test_tuple_returning_layers(method):
    torch.manual_seed(0)
    lm = _TupleLM()
    ids = torch.randint(0, 50, (2, 6))
    with torch.no_grad(), ResidCapture(lm, [0, 1, 3], method=method) as cap:
        _, every = lm(ids)
    for k in (0, 1, 3):
        assert torch.equal(cap.states[k], every[k])


def test_offload_rules():
    assert _offload_device(None, torch.device("cuda", 0)) == torch.device("cpu")
    assert _offload_device(None, torch.device("cpu")) is None
    assert _offload_device("keep", torch.device("cuda", 0)) is None
    assert _offload_device(False, torch.device("cuda", 0)) is None
    assert _offload_device("cpu", torch.device("cpu")) == torch.device("cpu")


def test_explicit_offload_device_is_used(targets):
    target = targets["llama"]
    ids = target.encode(PROMPTS[:1])["input_ids"]
    states = capture_resid(target, ids, [2], offload="cpu")
    assert states[2].device == torch.device("cpu")


def test_bad_points_and_inputs(targets):
    target = targets["llama"]
    ids = target.encode(PROMPTS[:1])["input_ids"]
    with pytest.raises(Eagle3LabError, match=r"0\.\.4"):
        capture_resid(target, ids, [2, 5])
    with pytest.raises(Eagle3LabError, match="distinct"):
        capture_resid(target, ids, [2, 2])
    with pytest.raises(Eagle3LabError, match="integer"):
        capture_resid(target, ids, [1.5])
    with pytest.raises(Eagle3LabError, match="at least one"):
        capture_resid(target, ids, [])
    with pytest.raises(Eagle3LabError, match="non-empty"):
        capture_resid(target, torch.zeros(1, 0, dtype=torch.long), [1])
    with pytest.raises(Eagle3LabError, match="vocabulary"):
        capture_resid(target, torch.tensor([[1, 2, 300]]), [1])
    with pytest.raises(Eagle3LabError, match="method"):
        ResidCapture(target, [1], method="sideways")


def test_resid_modules_match_target(targets):
    target = targets["deepseek_v3"]
    embed, layers, norm = resid_modules(target.model)
    assert embed is target.model.model.embed_tokens and norm is target.model.model.norm
    assert len(layers) == target.num_layers == 4


def test_build_fc_input_orders_and_label(targets):
    target = targets["llama"]
    ids = target.encode(PROMPTS[:2])["input_ids"]
    states = capture_resid(target, ids, [0, 1, 2, 4])
    h = target.hidden_size
    served = build_fc_input(states, [1, 2, 4], num_layers=4)
    trained = build_fc_input(states, [0, 1, 2], num_layers=4)
    swapped = build_fc_input(states, [2, 0, 1])
    repeated = build_fc_input(states, [2, 2, 4])
    assert served.tensor.shape == (*ids.shape, 3 * h)
    assert served.label == "[resid[1], resid[2], resid[4] (final, pre-norm)]"
    assert trained.label == "[resid[0] (embedding), resid[1], resid[2]]"
    assert torch.equal(trained.tensor, torch.cat([states[0], states[1], states[2]], -1))
    assert torch.equal(swapped.chunk(0), states[2]) and torch.equal(swapped.chunk(1), states[0])
    assert torch.equal(repeated.chunk(0), repeated.chunk(1))
    assert not torch.equal(served.tensor, trained.tensor)
    with pytest.raises(Eagle3LabError, match="captured"):
        build_fc_input(states, [3])
    with pytest.raises(Eagle3LabError, match="at least one"):
        build_fc_input(states, [])
    with torch.no_grad(), ResidCapture(target, [0, 1]) as cap:
        target.model(ids)
    assert torch.equal(cap.fc_input([1, 0]).tensor, torch.cat([states[1], states[0]], -1))


def test_paths_agreement_and_similarity_tables(targets):
    from eagle3lab.models.capture import paths_agreement, resid_similarity

    target = targets["mistral"]
    batch = target.encode(PROMPTS)
    table = paths_agreement(target, batch["input_ids"], batch["attention_mask"])
    assert len(table) == 5 and table["bit-identical"].all()
    assert (table["pre vs post"] == 0).all()
    assert (table["HF hidden_states[k] vs pre"].iloc[:-1] == 0).all() and table["HF hidden_states[k] vs pre"].iloc[-1] > 0
    states = capture_resid(target, batch["input_ids"], [0, 2, 4], batch["attention_mask"])
    sim = resid_similarity(states, batch["attention_mask"])
    assert sim.shape == (3, 3) and list(sim.index) == ["resid[0]", "resid[2]", "resid[4]"]
    assert abs(sim.iloc[1, 1] - 1) < 1e-5 and sim.iloc[0, 2] < 0.99
    assert abs(sim.iloc[0, 2] - sim.iloc[2, 0]) < 1e-6


def test_fc_input_difference_per_slot_and_padding_dropped():
    torch.manual_seed(0)
    target = tiny_target("llama", num_layers=4, hidden_size=32)
    ids = torch.randint(0, target.vocab_size, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0                                   # right padding in the second row
    states = capture_resid(target, ids, range(5), mask)
    a, b = build_fc_input(states, [0, 1, 3]), build_fc_input(states, [0, 2, 4])
    diff = fc_input_difference(a, b, mask, names=("trained", "served"))
    assert list(diff.index) == ["slot 0", "slot 1", "slot 2", "whole fc input"]
    assert diff.loc["slot 0", "cosine"] == pytest.approx(1.0, abs=1e-6)
    assert diff.loc["slot 0", "relative_distance"] == 0.0
    assert diff.loc["slot 0", "norm_ratio"] == pytest.approx(1.0)
    assert diff.loc["slot 2", ["trained", "served"]].tolist() == ["resid[3]", "resid[4]"]
    # by hand over the 7 + 4 valid tokens only
    keep = mask.reshape(-1).bool()
    x, y = states[1].reshape(-1, 32)[keep], states[2].reshape(-1, 32)[keep]
    assert diff.loc["slot 1", "cosine"] == pytest.approx(float(torch.cosine_similarity(x, y, dim=-1).mean()), abs=1e-6)
    assert diff.loc["slot 1", "relative_distance"] == pytest.approx(float((y - x).norm() / x.norm()), rel=1e-5)
    assert diff.loc["slot 1", "norm_ratio"] == pytest.approx(float(y.norm() / x.norm()), rel=1e-5)
    assert 0 < diff.loc["whole fc input", "relative_distance"] < diff["relative_distance"].iloc[1:3].max()
    with pytest.raises(Eagle3LabError, match="same shape"):
        fc_input_difference(a, build_fc_input(states, [0, 1]))
