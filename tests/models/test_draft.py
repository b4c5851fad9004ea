"""The draft's math against an independent straight-line reference, a hand-computed case,
the KV cache, explicit masks, gradients, named hooks and engine profiles."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.draft import DraftCache, DraftConfig, Eagle3Draft
from eagle3lab.models.rope import DraftRope

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}


def make_draft(seed=0, layers=1, rope_scaling=None, **flags) -> Eagle3Draft:
    cfg = DraftConfig(hidden_size=16, target_hidden_size=24, intermediate_size=40, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=8, num_hidden_layers=layers, vocab_size=50,
                      draft_vocab_size=20, rms_norm_eps=1e-5, rope_theta=500000.0, rope_scaling=rope_scaling,
                      aux_layer_ids=(1, 3, 5), **flags)
    torch.manual_seed(seed)
    draft = Eagle3Draft(cfg, profile="speculators")
    with torch.no_grad():
        for p in draft.parameters():
            p.normal_(0, 0.3)  # norm weights away from 1 so a wrong norm shows up
        draft.d2t.copy_(torch.arange(20) * 2 - torch.arange(20))  # target ids 0, 2, 4, ...
        draft.t2d.zero_()
        draft.t2d[torch.arange(20) * 2] = True
    return draft


# ---------------------------------------------------------------------------- the reference

def reference(sd, *, eps, heads, kv_heads, inv_freq, input_ids, aux=None, recycled=None,
              norm_before_residual=False, norm_before_fc=False, fc_norm=False, recycle_postnorm=False):
    """EAGLE-3 forward written out in float64 with plain ops, sharing nothing with eagle3lab.models.draft."""
    w = {k: v.double() for k, v in sd.items() if v.dtype.is_floating_point}

    def rms(x, weight):
        return weight * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)

    def attention(x, layer):
        B, T, _ = x.shape
        q = (x @ w[f"{layer}.self_attn.q_proj.weight"].T).reshape(B, T, heads, -1)
        k = (x @ w[f"{layer}.self_attn.k_proj.weight"].T).reshape(B, T, kv_heads, -1)
        v = (x @ w[f"{layer}.self_attn.v_proj.weight"].T).reshape(B, T, kv_heads, -1)
        d = q.shape[-1]
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq.double()[None, :]   # [T, d/2]
        c, s = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]

        def rot(t):  # rotate each pair (i, i + d/2) by its angle
            a, b = t[..., : d // 2], t[..., d // 2:]
            return torch.cat([a * c - b * s, b * c + a * s], dim=-1)

        q, k = rot(q), rot(k)
        out = torch.zeros(B, T, heads, d, dtype=torch.float64)
        group = heads // kv_heads
        for b in range(B):
            for h in range(heads):
                for i in range(T):
                    scores = torch.stack([q[b, i, h] @ k[b, j, h // group] for j in range(i + 1)]) / math.sqrt(d)
                    p = torch.softmax(scores, dim=0)
                    out[b, i, h] = sum(p[j] * v[b, j, h // group] for j in range(i + 1))
        return out.reshape(B, T, heads * d) @ w[f"{layer}.self_attn.o_proj.weight"].T

    def mlp(x, layer):
        g = x @ w[f"{layer}.mlp.gate_proj.weight"].T
        u = x @ w[f"{layer}.mlp.up_proj.weight"].T
        return (g * torch.sigmoid(g) * u) @ w[f"{layer}.mlp.down_proj.weight"].T

    emb = w["embed_tokens.weight"][input_ids]
    if aux is not None:
        x = aux.double()
        if norm_before_fc:
            x = rms(x, w["input_norm.weight"])
        if fc_norm:
            n_aux = len([k for k in w if k.startswith("fc_norm.")])
            size = x.shape[-1] // n_aux
            x = torch.cat([rms(x[..., i * size:(i + 1) * size], w[f"fc_norm.{i}.weight"]) for i in range(n_aux)], -1)
        h = x @ w["fc.weight"].T
    else:
        h = recycled.double()
    n_layers = len({k.split(".")[1] for k in w if k.startswith("layers.")})
    for i in range(n_layers):
        L = f"layers.{i}"
        if i == 0:
            e = rms(emb, w[f"{L}.input_layernorm.weight"])
            hn = rms(h, w[f"{L}.hidden_norm.weight"])
            res = hn if norm_before_residual else h
            h = res + attention(torch.cat([e, hn], dim=-1), L)
        else:
            h = h + attention(rms(h, w[f"{L}.input_layernorm.weight"]), L)
        h = h + mlp(rms(h, w[f"{L}.post_attention_layernorm.weight"]), L)
    normed = rms(h, w["norm.weight"])
    logits = normed @ w["lm_head.weight"].T
    return logits, (normed if recycle_postnorm else h)


def _ref(draft, ids, **kw):
    c = draft.config
    return reference(draft.state_dict(), eps=c.rms_norm_eps, heads=c.num_attention_heads,
                     kv_heads=c.num_key_value_heads, inv_freq=draft.rope.inv_freq, input_ids=ids, **kw)


FC_MODES = ["plain", "norm_before_fc", "fc_norm"]


@pytest.mark.parametrize("fc_mode,nbr,norm_output,layers",
                         list(itertools.product(FC_MODES, [False, True], [False, True], [1, 2])))
def test_module_matches_reference_for_every_flag_combination(fc_mode, nbr, norm_output, layers):
    flags = dict(norm_before_residual=nbr, norm_before_fc=fc_mode == "norm_before_fc",
                 fc_norm=fc_mode == "fc_norm", norm_output=norm_output)
    draft = make_draft(seed=layers, layers=layers, **flags)
    torch.manual_seed(1)
    ids, aux = torch.randint(0, 50, (2, 5)), torch.randn(2, 5, 72)
    out = draft(ids, aux)
    ref_logits, ref_hidden = _ref(draft, ids, aux=aux, norm_before_residual=nbr,
                                  norm_before_fc=flags["norm_before_fc"], fc_norm=flags["fc_norm"],
                                  recycle_postnorm=norm_output)
    torch.testing.assert_close(out.logits.double(), ref_logits, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(out.hidden.double(), ref_hidden, atol=2e-5, rtol=1e-4)
    # the recycle path skips fc and reads the draft's own state
    rec = draft(ids, recycled_hidden=out.hidden)
    ref_logits, _ = _ref(draft, ids, recycled=out.hidden, norm_before_residual=nbr)
    torch.testing.assert_close(rec.logits.double(), ref_logits, atol=2e-5, rtol=1e-4)


def test_each_flag_changes_the_output():
    torch.manual_seed(1)
    ids, aux = torch.randint(0, 50, (1, 4)), torch.randn(1, 4, 72)
    base = make_draft(norm_before_residual=False)(ids, aux)
    other = make_draft(norm_before_residual=True)(ids, aux)
    assert (base.logits - other.logits).abs().max() > 1e-2
    post = make_draft(norm_output=True)(ids, aux)
    torch.testing.assert_close(post.logits, base.logits)            # logits are unchanged by norm_output
    assert (post.hidden - base.hidden).abs().max() > 1e-2          # only the recycled state differs


def test_llama3_rope_matches_transformers_and_enters_the_math():
    scaling = dict(LLAMA3)
    hf = LlamaConfig(hidden_size=32, num_attention_heads=4, rope_theta=500000.0, rope_scaling=scaling)
    expected, _ = ROPE_INIT_FUNCTIONS["llama3"](hf, "cpu")
    torch.testing.assert_close(DraftRope(8, 500000.0, scaling, 2048).inv_freq, expected.float())
    plain = DraftRope(8, 500000.0, None, 2048).inv_freq
    assert not torch.allclose(plain, expected.float())             # the variant really changes frequencies
    draft = make_draft(rope_scaling=scaling)
    ids, aux = torch.randint(0, 50, (1, 6)), torch.randn(1, 6, 72)
    ref_logits, _ = reference(draft.state_dict(), eps=1e-5, heads=4, kv_heads=2, inv_freq=expected,
                              input_ids=ids, aux=aux)
    torch.testing.assert_close(draft(ids, aux).logits.double(), ref_logits, atol=2e-5, rtol=1e-4)


def test_hand_computed_tiny_case():
    """H=2, one head, T=1 (attention = v): every number below is worked out by hand."""
    cfg = DraftConfig(hidden_size=2, intermediate_size=1, num_attention_heads=1, vocab_size=3, rms_norm_eps=0.0,
                      aux_layer_ids=(0, 1, 2), norm_before_residual=False)
    sd = {
        "embed_tokens.weight": torch.tensor([[1.0, -1.0], [0.0, 0.0], [0.0, 0.0]]),  # token 0 -> e = [1, -1]
        "fc.weight": torch.tensor([[1.0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0]]),     # h = aux[:2]
        "layers.0.input_layernorm.weight": torch.ones(2), "layers.0.hidden_norm.weight": torch.ones(2),
        "layers.0.self_attn.q_proj.weight": torch.zeros(2, 4), "layers.0.self_attn.k_proj.weight": torch.zeros(2, 4),
        "layers.0.self_attn.v_proj.weight": torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]]),  # v = [e_n[0], h_n[1]]
        "layers.0.self_attn.o_proj.weight": torch.eye(2),
        "layers.0.post_attention_layernorm.weight": torch.ones(2),
        "layers.0.mlp.gate_proj.weight": torch.tensor([[1.0, 1.0]]), "layers.0.mlp.up_proj.weight": torch.tensor([[1.0, 0.0]]),
        "layers.0.mlp.down_proj.weight": torch.tensor([[1.0], [0.0]]),
        "norm.weight": torch.ones(2), "lm_head.weight": torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
    }
    for nbr, residual in ((False, 2.0), (True, 1.0)):
        draft = Eagle3Draft(DraftConfig(**{**cfg.to_dict(), "norm_before_residual": nbr}), profile="speculators")
        draft.load_state_dict(sd)
        aux = torch.tensor([[[2.0, 2.0, 5.0, 5.0, 5.0, 5.0]]])
        out, cache = draft.run_with_cache(torch.tensor([[0]]), aux)
        # e = [1,-1] has rms 1 -> emb_normed [1,-1]; h = [2,2] has rms 2 -> hid_normed [1,1]
        torch.testing.assert_close(cache["hook_emb_normed"], torch.tensor([[[1.0, -1.0]]]))
        torch.testing.assert_close(cache["hook_hid_normed"], torch.tensor([[[1.0, 1.0]]]))
        # residual = raw h [2,2], or hid_normed [1,1] with norm_before_residual; attn_out = v = [1, 1]
        torch.testing.assert_close(cache["hook_attn_out"], torch.tensor([[[1.0, 1.0]]]))
        r = residual + 1.0                                    # resid_mid = [r, r] -> normed [1, 1]
        g = 2.0                                               # gate = 1 + 1, up = 1
        mlp = g / (1 + math.exp(-g))                          # silu(2) * 1 = 1.761594...
        out_h = torch.tensor([r + mlp, r])                    # resid_out
        torch.testing.assert_close(out.hidden[0, 0], out_h)
        rms = math.sqrt(((r + mlp) ** 2 + r ** 2) / 2)
        n0, n1 = (r + mlp) / rms, r / rms
        torch.testing.assert_close(out.logits[0, 0], torch.tensor([n0, n1, n0 + n1]))
    assert abs(mlp - 1.7615941559557649) < 1e-12


# ---------------------------------------------------------------------------- cache, masks, gradients

def test_incremental_drafting_with_cache_matches_one_pass_and_crop_rolls_back():
    draft = make_draft()
    torch.manual_seed(2)
    ids, aux = torch.randint(0, 50, (2, 7)), torch.randn(2, 7, 72)
    full = draft(ids, aux)
    cache = DraftCache()
    parts = [draft(ids[:, :3], aux[:, :3], cache=cache)]
    for t in range(3, 7):
        parts.append(draft(ids[:, t:t + 1], aux[:, t:t + 1], cache=cache))
    torch.testing.assert_close(torch.cat([p.logits for p in parts], 1), full.logits, atol=1e-5, rtol=1e-5)
    assert cache.seq_len == 7
    cache.crop(5)                                          # reject the last two positions, redo them
    again = draft(ids[:, 5:], aux[:, 5:], cache=cache)
    torch.testing.assert_close(again.logits, full.logits[:, 5:], atol=1e-5, rtol=1e-5)
    with pytest.raises(Eagle3LabError, match="seq_len=7"):
        cache.crop(9)


def test_explicit_mask_equals_default_causal_and_a_tree_mask_isolates_branches():
    draft = make_draft()
    torch.manual_seed(3)
    ids, aux = torch.randint(0, 50, (1, 4)), torch.randn(1, 4, 72)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()[None, None]
    torch.testing.assert_close(draft(ids, aux, attention_mask=causal).logits, draft(ids, aux).logits)
    # prefix of 2, then two sibling branches at the same position: each sees the prefix and itself only
    cache = DraftCache()
    prefix = draft(ids[:, :2], aux[:, :2], cache=cache)
    tree = torch.tensor([[True, True, True, False], [True, True, False, True]])[None, None]
    branches = draft(ids[:, 2:], recycled_hidden=prefix.hidden[:, -1:].expand(1, 2, 16), cache=cache,
                     position_ids=torch.tensor([[2, 2]]), attention_mask=tree)
    for b in range(2):
        c2 = DraftCache()
        draft(ids[:, :2], aux[:, :2], cache=c2)
        alone = draft(ids[:, 2 + b:3 + b], recycled_hidden=prefix.hidden[:, -1:], cache=c2)
        torch.testing.assert_close(branches.logits[:, b], alone.logits[:, 0], atol=1e-5, rtol=1e-5)
    with pytest.raises(Eagle3LabError, match="attention_mask"):
        draft(ids, aux, attention_mask=torch.ones(1, 1, 4, 5, dtype=torch.bool))


def test_gradients_flow_through_cache_and_recycled_states():
    draft = make_draft()
    draft.requires_grad_(True)
    ids, aux = torch.randint(0, 50, (1, 3)), torch.randn(1, 3, 72)
    cache = DraftCache()
    first = draft(ids, aux, cache=cache)
    # training-time test: step 2 reads step 1's recycled states, attending to cache + its diagonal
    mask = torch.cat([torch.ones(3, 3, dtype=torch.bool).tril(), torch.eye(3, dtype=torch.bool)], 1)[None, None]
    second = draft(ids, recycled_hidden=first.hidden, cache=cache, position_ids=torch.arange(1, 4)[None],
                   attention_mask=mask)
    second.logits.sum().backward()
    assert draft.fc.weight.grad is not None and draft.fc.weight.grad.abs().sum() > 0  # only via the cache/recycle
    assert draft.layers[0].self_attn.k_proj.weight.grad.abs().sum() > 0


# ---------------------------------------------------------------------------- hooks

def test_run_with_cache_records_names_and_patching_replaces_activations():
    draft = make_draft()
    ids, aux = torch.randint(0, 50, (1, 4)), torch.randn(1, 4, 72)
    out, cache = draft.run_with_cache(ids, aux, names=["hook_fc_out", "hook_residual", "layers.0.hook_mlp_*"])
    assert list(cache) == ["hook_fc_out", "layers.0.hook_residual", "layers.0.hook_mlp_in", "layers.0.hook_mlp_out"]
    torch.testing.assert_close(cache["hook_residual"], cache["hook_fc_out"])       # raw residual by default
    _, everything = draft.run_with_cache(ids, aux)
    assert set(everything) == set(draft.hook_names) - {"hook_recycled_in"}
    torch.testing.assert_close(everything["hook_logits"], out.logits)
    # patch the residual with the normed hidden = norm_before_residual, computed by hand
    patched = draft.run_with_patches(ids, aux, patches={"hook_residual": everything["layers.0.hook_hid_normed"]})
    twin = make_draft(norm_before_residual=True)(ids, aux)
    torch.testing.assert_close(patched.logits, twin.logits)
    # a hook returning None only observes; all hooks are gone after the block
    seen = []
    with draft.hooks({"layers.0.hook_attn_in": lambda t, name: seen.append((name, t.shape))}):
        draft(ids, aux)
    assert seen == [("layers.0.hook_attn_in", torch.Size([1, 4, 32]))]
    assert not any(p.fns for p in draft.hook_points.values())
    with pytest.raises(Eagle3LabError, match="hook_fc_normed needs"):
        draft.run_with_cache(ids, aux, names=["no_such_point"])
    with pytest.raises(Eagle3LabError, match=r"shape \(1, 4, 16\)"):
        draft.run_with_patches(ids, aux, patches={"hook_fc_out": torch.zeros(1, 4, 3)})


def test_hook_names_are_module_paths_and_never_a_module_s_name():
    draft = make_draft(layers=2, fc_norm=True)
    modules = dict(draft.named_modules())
    assert draft.hook_names[:5] == ("hook_embed", "hook_fc_in", "hook_fc_normed", "hook_fc_out", "hook_recycled_in")
    assert "layers.0.self_attn.hook_q" in draft.hook_names and "layers.1.hook_resid_out" in draft.hook_names
    for name in draft.hook_names:
        path, _, attr = name.rpartition(".")
        assert attr.startswith("hook_") and name not in modules
        assert getattr(modules[path], attr) is draft.hook_points[name]    # the name is where the point lives
    # only layer 0 has the dual-norm step's points; q/k/v live in self_attn
    assert [n for n in draft.hook_names if "normed" in n and n.startswith("layers.")] == \
        ["layers.0.hook_emb_normed", "layers.0.hook_hid_normed"]
    assert [n for n in draft.hook_names if n.endswith(("hook_q", "hook_k", "hook_v"))] == \
        [f"layers.{i}.self_attn.hook_{x}" for i in (0, 1) for x in "qkv"]


def test_a_hook_point_not_named_hook_something_is_refused():
    from torch import nn

    from eagle3lab.models.hooks import HookPoint, setup_hooks

    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.resid = HookPoint()

    with pytest.raises(TypeError, match="Bad.resid.*must start with 'hook_' \\(hook_resid\\)"):
        setup_hooks(Bad())


def test_first_layer_names_that_are_not_full_paths_mean_layer_0():
    draft = make_draft(layers=2)
    ids, aux = torch.randint(0, 50, (1, 4)), torch.randn(1, 4, 72)
    _, cache = draft.run_with_cache(ids, aux, names=["hook_q", "self_attn.hook_k", "hook_resid_out"])
    assert list(cache) == ["layers.0.self_attn.hook_q", "layers.0.self_attn.hook_k", "layers.0.hook_resid_out"]
    assert cache["hook_q"] is cache["layers.0.self_attn.hook_q"]
    assert cache["self_attn.hook_k"].shape == (1, 2, 4, 8)               # [B, kv heads, T, head_dim]


def test_eagle3lab_0_1_names_still_work_with_a_deprecation_warning_naming_the_new_name():
    draft = make_draft(layers=2)
    ids, aux = torch.randint(0, 50, (1, 4)), torch.randn(1, 4, 72)
    _, new = draft.run_with_cache(ids, aux)
    with pytest.warns(DeprecationWarning, match=r"'layers.0.residual' -> 'layers.0.hook_residual'"):
        _, old = draft.run_with_cache(ids, aux, names=["fc_out", "layers.0.residual", "layers.1.q", "logits"])
    assert list(old) == ["hook_fc_out", "layers.0.hook_residual", "layers.1.self_attn.hook_q", "hook_logits"]
    with pytest.warns(DeprecationWarning, match=r"'fc_out' -> 'hook_fc_out'"):
        assert torch.equal(old["fc_out"], new["hook_fc_out"])
    with pytest.warns(DeprecationWarning, match=r"'q' -> 'layers.0.self_attn.hook_q'"):
        assert torch.equal(new["q"], new["layers.0.self_attn.hook_q"])
    seen = []
    with pytest.warns(DeprecationWarning, match=r"'attn_in' -> 'layers.0.hook_attn_in'"), \
            draft.hooks({"attn_in": lambda t, name: seen.append(name)}):
        draft(ids, aux)
    assert seen == ["layers.0.hook_attn_in"]                                # a hook is handed the new name
    with pytest.warns(DeprecationWarning, match="'residual'"):
        patched = draft.run_with_patches(ids, aux, patches={"residual": new["layers.0.hook_hid_normed"]})
    torch.testing.assert_close(patched.logits, make_draft(layers=2, norm_before_residual=True)(ids, aux).logits)
    # an old-style pattern is refused with the pattern to write instead
    with pytest.raises(Eagle3LabError, match=r"try 'layers.0.hook_mlp_\*'"):
        draft.run_with_cache(ids, aux, names=["layers.0.mlp_*"])
    with pytest.raises(KeyError, match=r"'layers.1.v' was not recorded \(hook points are named hook_<what> now: "
                                       r"'layers.1.self_attn.hook_v'\)"):
        old["layers.1.v"]


def test_the_hook_table_in_docs_lists_every_hook_name_of_every_family():
    import fnmatch
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "hooks.md").read_text()
    table = doc.split("## The draft's hook points")[1].split("\n## ")[0]
    documented = re.findall(r"^\| `([^`]+)` \|", table, flags=re.M)
    assert len(documented) == len(set(documented)) >= 20
    mla = DraftConfig(hidden_size=16, target_hidden_size=24, intermediate_size=40, num_attention_heads=4,
                      vocab_size=50, num_hidden_layers=3, aux_layer_ids=(1, 3, 5), attention="mla", kv_lora_rank=16,
                      qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5, q_lora_rank=12)
    names = set(Eagle3Draft(mla).hook_names)
    for flags in ({"fc_norm": True}, {"norm_before_fc": True}, {"attention": "qwen3"}):
        names |= set(make_draft(layers=3, **flags).hook_names)
    patterns = {d: d.replace("{i}", "[0-9]*") for d in documented}
    assert not [n for n in names if not any(fnmatch.fnmatchcase(n, p) for p in patterns.values())]   # undocumented
    assert not [d for d, p in patterns.items() if not any(fnmatch.fnmatchcase(n, p) for n in names)]  # no such hook


def test_profiles_change_the_arithmetic_with_the_same_weights():
    draft = make_draft(norm_before_residual=True)
    ids, aux = torch.randint(0, 50, (1, 4)), torch.randn(1, 4, 72)
    as_sglang = draft.under("sglang")
    assert as_sglang.fc.weight is draft.fc.weight                        # shared, not copied
    assert draft.settings.norm_before_residual and not as_sglang.settings.norm_before_residual
    twin = make_draft(norm_before_residual=False)
    torch.testing.assert_close(as_sglang(ids, aux).logits, twin(ids, aux).logits)
    assert draft.profile.name == "speculators"                           # the original is untouched
    with pytest.raises(Eagle3LabError, match="one of speculators"):
        draft.under("tensorrt")


def test_inputs_are_checked():
    draft = make_draft()
    ids = torch.randint(0, 50, (1, 4))
    with pytest.raises(Eagle3LabError, match=r"\[1, 4, 72\]"):
        draft(ids, torch.randn(1, 4, 48))
    with pytest.raises(Eagle3LabError, match="exactly one"):
        draft(ids)
    # an unknown RoPE type is refused with the types that exist; yarn, mrope, longrope, dynamic load (test_rope.py)
    with pytest.raises(Eagle3LabError, match=r"key 'rope_scaling.rope_type': expected one of default, linear, "
                                             r"dynamic, yarn, longrope, llama3, proportional, mrope.*found 'ntk2'"):
        DraftConfig(hidden_size=8, intermediate_size=8, num_attention_heads=2, vocab_size=4,
                    rope_scaling={"rope_type": "ntk2", "factor": 4.0})


def test_to_target_ids_uses_offsets():
    draft = make_draft()
    assert draft.to_target_ids(torch.tensor([0, 1, 19])).tolist() == [0, 2, 38]


def test_rewired_forces_wiring_and_flags_and_survives_under():
    trained = make_draft(norm_before_residual=True)          # as written in the checkpoint
    plain = make_draft(norm_before_residual=False)            # same weights (same seed), flag off
    ids, aux = torch.randint(0, 40, (1, 6)), torch.randn(1, 6, plain.config.num_aux * plain.config.target_hidden_size)
    forced = plain.rewired(norm_before_residual=True)
    assert torch.equal(forced(ids, aux).logits, trained(ids, aux).logits)
    assert not torch.equal(plain(ids, aux).logits, trained(ids, aux).logits)
    # SGLang ignores the flag, but an explicit hypothesis is kept when the profile changes
    assert forced.under("sglang").settings.norm_before_residual is True
    assert trained.under("sglang").settings.norm_before_residual is False
    assert forced.settings.decisions["norm_before_residual"] == (True, "set explicitly with rewired()")
    plain.num_target_layers = 12
    wired = plain.rewired(aux_resid=[0, 3, 7])
    assert wired.aux_resid == (0, 3, 7) and wired.under("sglang").aux_resid == (0, 3, 7)
    assert wired.fc.weight is plain.fc.weight                  # shared, not copied


def test_rewired_rejects_unknown_names_and_wrong_width():
    draft = make_draft()
    with pytest.raises(Eagle3LabError, match="key 'norm_before_residul'.*DraftSettings switch"):
        draft.rewired(norm_before_residul=True)
    with pytest.raises(Eagle3LabError, match=r"key 'aux_resid': expected 3 resid indices.*found \[0, 3\]"):
        draft.rewired(aux_resid=[0, 3])


def test_rewired_refuses_switches_whose_weights_the_draft_lacks():
    draft = make_draft()   # a Llama draft without fc norms
    for flag, owner in (("qk_norm", "q_norm/k_norm"), ("fc_norm", "fc_norm"), ("norm_before_fc", "input_norm")):
        with pytest.raises(Eagle3LabError, match=rf"rewired: key '{flag}': expected .*{owner}.*found true"):
            draft.rewired(**{flag: True})
        draft.rewired(**{flag: False})   # switching one off is always possible


@pytest.mark.parametrize("rope,why", [
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 0}, "ValueError"),
    ({"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [1.0] * 4,
      "original_max_position_embeddings": 0}, "ZeroDivisionError"),
    ({"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [1.0] * 3,
      "original_max_position_embeddings": 16}, "RuntimeError"),
    ({"type": "linear", "factor": 0.0}, "inf"),
    ({"rope_type": "yarn", "factor": -2.0, "original_max_position_embeddings": 16}, "-"),
], ids=["yarn-original-0", "longrope-original-0", "longrope-long-length", "linear-factor-0", "yarn-negative"])
def test_bad_rope_values_are_refused_naming_the_key(rope, why):
    with pytest.raises(Eagle3LabError, match=rf"key 'rope_scaling': expected .*finite, positive.*found .*{why}"):
        DraftRope(8, 10000.0, rope, 64)


def test_mla_geometry_stated_against_its_rule_is_refused():
    sizes = dict(attention="mla", q_lora_rank=None, kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4,
                 v_head_dim=4)
    base = dict(hidden_size=16, intermediate_size=32, num_attention_heads=4, vocab_size=32, **sizes)
    assert DraftConfig(**base, num_key_value_heads=4, head_dim=4).num_key_value_heads == 4   # as the rule says
    with pytest.raises(Eagle3LabError, match="key 'num_key_value_heads': expected 4 .*every head reads the one "
                                             "latent.*found 2"):
        DraftConfig(**base, num_key_value_heads=2)
    with pytest.raises(Eagle3LabError, match="key 'head_dim': expected 4 .*qk_rope_head_dim.*found 8"):
        DraftConfig(**base, head_dim=8)


def test_attention_kinds_have_one_home_and_each_is_built():
    from eagle3lab.models import draft_attention, families

    assert not hasattr(draft_attention, "ATTENTION_KINDS")   # the families' registry is the one home
    sizes = dict(q_lora_rank=None, kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4)
    built = {kind: type(Eagle3Draft(DraftConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                                vocab_size=32, attention=kind, **(sizes if kind == "mla" else {})))
                        .layers[0].self_attn).__name__ for kind in families.ATTENTION_KINDS}
    assert built == {"llama": "Attention", "qwen3": "Qwen3Attention", "mla": "MLAAttention"}
    cfg = DraftConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2, vocab_size=32)
    cfg.attention = "gqa"
    with pytest.raises(Eagle3LabError, match="key 'attention': expected one of llama, qwen3, mla, found 'gqa'"):
        families.make_attention(cfg, 32, 0)


def test_rope_table_rows_equal_the_angles_computed_per_call():
    """Consecutive positions read a cached cos/sin table: bit-identical to computing them, per dtype."""
    draft = make_draft(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    for dtype in (torch.float32, torch.bfloat16):
        for past, T in ((0, 1), (0, 7), (130, 1), (300, 40)):     # 300 + 40 grows the table past its first size
            cos, sin = draft._rope(past, T, None, dtype, torch.device("cpu"))
            pos = torch.arange(past, past + T)[None]
            ref_cos, ref_sin = draft._rope(past, T, pos, dtype, torch.device("cpu"))
            assert cos.dtype == dtype and torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin)
    twin = draft.under("vllm")
    assert twin._rope_table == {} and len(draft._rope_table) == 2   # a twin builds its own


def test_rope_table_survives_inference_mode_for_training():
    """A forward under inference_mode must not leave a table that a training forward cannot use."""
    draft = make_draft()
    ids, aux = torch.randint(0, 50, (1, 5)), torch.randn(1, 5, 72)
    with torch.inference_mode():
        draft(ids, aux)
    draft(ids, aux).logits.sum().backward()
    assert draft.fc.weight.grad is not None


def test_logits_to_keep_gives_the_last_rows_of_the_full_logits():
    draft = make_draft()
    ids, aux = torch.randint(0, 50, (2, 6)), torch.randn(2, 6, 72)
    full, last = draft(ids, aux), draft(ids, aux, logits_to_keep=2)
    assert last.logits.shape == (2, 2, 20) and last.hidden.shape == full.hidden.shape
    torch.testing.assert_close(last.logits, full.logits[:, -2:], atol=1e-6, rtol=1e-6)
    with pytest.raises(Eagle3LabError, match="logits_to_keep"):
        draft(ids, aux, logits_to_keep=-1)


def test_bound_to_a_parameter_embedding_leaves_the_original_draft_unchanged():
    draft = Eagle3Draft(DraftConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2, vocab_size=50))
    before = [name for name, _ in draft.named_parameters()]
    emb = torch.nn.Parameter(torch.randn(50, 16))
    twin = draft.bound(target_embedding=emb)
    assert [name for name, _ in draft.named_parameters()] == before
    assert twin.target_embedding.data_ptr() == emb.data_ptr()
