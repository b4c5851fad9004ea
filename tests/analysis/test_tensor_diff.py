"""tensor_diff: two drafts, or a draft and a recorded trace, compared hook point by hook point."""

from __future__ import annotations

import json
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from helpers.tiny_models import tiny_draft, tiny_spec_target  # noqa: E402

from eagle3lab import bundled  # noqa: E402
from eagle3lab.analysis import tensor_diff as td  # noqa: E402
from eagle3lab.analysis.plots import plot_tensor_diff  # noqa: E402
from eagle3lab.analysis.tensor_diff import TOLERANCES, load_trace, save_trace, tensor_diff  # noqa: E402
from eagle3lab.errors import Eagle3LabError  # noqa: E402

pytestmark = pytest.mark.usefixtures("single_thread")

FIRST_LAYER_BEFORE_RESIDUAL = ["hook_embed", "hook_fc_in", "hook_fc_out", "layers.0.hook_emb_normed",
                               "layers.0.hook_hid_normed"]


@pytest.fixture(scope="module")
def draft():
    target = tiny_spec_target()
    return tiny_draft(target, train_steps=0)


@pytest.fixture(scope="module")
def inputs(draft):
    g = torch.Generator().manual_seed(3)
    cfg = draft.config
    return {"input_ids": torch.randint(0, cfg.vocab_size, (2, 7), generator=g),
            "aux_hidden_states": torch.randn(2, 7, cfg.num_aux * cfg.target_hidden_size, generator=g)}


@pytest.fixture(scope="module")
def trace(draft, inputs, tmp_path_factory):
    """The tiny draft's own run, saved and read back."""
    with torch.no_grad():
        _, cache = draft.run_with_cache(**inputs)
    path = save_trace(tmp_path_factory.mktemp("trace") / "own.safetensors", cache, metadata={"profile": "speculators"})
    return load_trace(path)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def fired(draft, inputs) -> list[str]:
    with torch.no_grad():
        _, cache = draft.run_with_cache(**inputs)
    return list(cache)


# ------------------------------------------------------------------ the required case: SGLang vs vLLM

def test_sglang_and_vllm_part_at_the_first_layer_residual_on_the_case_draft(bundled_models):
    from eagle3lab.models.capture import ResidCapture, concat_aux
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET, device="cpu")
    case = load_draft(bundled.DRAFT_CASE, target=target, device="cpu")
    assert case.config.norm_before_residual is True   # what SGLang ignores and vLLM honours
    ids = torch.randint(0, target.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    wiring = list(case.under("vllm").aux_resid)
    with torch.no_grad(), ResidCapture(target.model, sorted(wiring)) as cap:
        target.model(ids)
    aux = concat_aux(cap.states, wiring)   # the same fc input on both sides

    diff = tensor_diff(case.under("sglang"), case.under("vllm"), input_ids=ids, aux_hidden_states=aux)

    assert diff.first_divergence == "layers.0.hook_residual"
    names = list(diff.table["name"])
    before = diff.table.iloc[:names.index("layers.0.hook_residual")]
    assert list(before["name"]) == FIRST_LAYER_BEFORE_RESIDUAL
    assert (before["max_abs"] == 0).all() and not before["diverges"].any()   # identical, not merely close
    row = diff.table.set_index("name").loc["layers.0.hook_residual"]
    assert row["max_rel"] > 1 and row["max_abs"] > 1e3 * diff.atol * row["rms_b"]   # no tolerance hides it
    assert "layers.0.hook_residual" in diff.summary() and "identical" in diff.summary()
    assert "sglang" in diff.label_a and "vllm" in diff.label_b
    # the cause, read off the hook points: SGLang's residual is the raw fc output, vLLM's the normed one
    with torch.no_grad():
        _, sg = case.under("sglang").run_with_cache(ids, aux, names=["hook_fc_out", "hook_residual"])
        _, vl = case.under("vllm").run_with_cache(ids, aux, names=["hook_hid_normed", "hook_residual"])
    assert torch.equal(sg["hook_residual"], sg["hook_fc_out"]) and torch.equal(vl["hook_residual"], vl["hook_hid_normed"])


def test_the_same_residual_switch_on_a_tiny_draft_is_found_there_too(draft, inputs):
    assert draft.settings.norm_before_residual is False
    diff = tensor_diff(draft, draft.rewired(norm_before_residual=True), **inputs)
    assert diff.first_divergence == "layers.0.hook_residual"
    assert "rewired {'norm_before_residual': True}" in diff.label_b
    assert diff.table.iloc[:5]["max_abs"].eq(0).all()


# ------------------------------------------------------------------ a draft against traces

def test_a_draft_against_its_own_saved_trace_has_no_divergence(draft, inputs, trace):
    assert list(trace) == fired(draft, inputs)          # load_trace gives the forward order back
    diff = tensor_diff(draft, trace, **inputs)
    assert diff.first_divergence is None
    assert list(diff.table["name"]) == fired(draft, inputs)
    assert (diff.table["max_abs"] == 0).all() and (diff.table["max_rel"] == 0).all()
    assert diff.only_in_a == () and diff.only_in_b == ()
    assert "agree at all" in diff.summary() and "own.safetensors" in diff.label_b


@pytest.mark.parametrize("point", ["hook_fc_out", "layers.0.self_attn.hook_k", "layers.0.hook_mlp_out", "hook_logits"])
def test_a_perturbed_point_is_named_first(draft, inputs, trace, point):
    bent = dict(trace)
    bent[point] = trace[point].clone()
    bent[point].view(-1)[5] += 1e-2 * float(trace[point].pow(2).mean().sqrt()) + 1e-3
    diff = tensor_diff(draft, bent, **inputs)
    assert diff.first_divergence == point
    assert list(diff.table.loc[diff.table["diverges"], "name"]) == [point]   # a trace's later points are as recorded
    names = list(diff.table["name"])
    assert (diff.table.iloc[:names.index(point)]["max_abs"] == 0).all()


def test_a_shape_mismatch_diverges_with_a_note(draft, inputs, trace):
    cut = dict(trace)
    cut["layers.0.hook_mlp_in"] = trace["layers.0.hook_mlp_in"][:, :-1]
    diff = tensor_diff(draft, cut, **inputs)
    assert diff.first_divergence == "layers.0.hook_mlp_in"
    row = diff.table.set_index("name").loc["layers.0.hook_mlp_in"]
    assert row["diverges"] and "shape mismatch" in row["note"] and row["max_abs"] != row["max_abs"]   # NaN
    assert row["shape_a"] == (2, 7, draft.config.hidden_size) and row["shape_b"] == (2, 6, draft.config.hidden_size)
    assert "shape mismatch" in diff.summary()
    point = next(p for p in diff.to_dict()["points"] if p["name"] == "layers.0.hook_mlp_in")
    assert point["max_abs"] is None and point["shape_b"] == [2, 6, draft.config.hidden_size]
    json.dumps(diff.to_dict(), allow_nan=False)


def test_noise_below_tolerance_is_not_flagged_and_above_it_is(draft, inputs, trace):
    def noisy(scale):
        g = torch.Generator().manual_seed(1)
        return {n: t + scale * float(t.pow(2).mean().sqrt()) * torch.randn(t.shape, generator=g)
                for n, t in trace.items()}

    quiet = tensor_diff(draft, noisy(1e-7), **inputs)
    assert quiet.first_divergence is None and (quiet.table["max_abs"] > 0).all()   # different, but within atol
    loud = tensor_diff(draft, noisy(1e-3), **inputs)
    assert loud.first_divergence == "hook_embed" and loud.table["diverges"].all()
    assert tensor_diff(draft, noisy(1e-3), atol=1e-1, **inputs).first_divergence is None   # loosened
    # atol_unit="abs" is torch.allclose's test exactly
    exact = tensor_diff(draft, noisy(1e-7), atol=0.0, rtol=0.0, atol_unit="abs", **inputs)
    assert exact.table["diverges"].all()
    for name, t in noisy(1e-4).items():
        ref = trace[name]
        one = tensor_diff({name: t}, {name: ref}, atol=1e-5, rtol=1e-3, atol_unit="abs")
        assert bool(one.table["diverges"][0]) == (not torch.allclose(t, ref, rtol=1e-3, atol=1e-5))


def test_a_bfloat16_trace_needs_the_bfloat16_preset(draft, inputs, trace):
    low = {n: t.bfloat16() for n, t in trace.items()}
    strict = tensor_diff(draft, low, **inputs)
    assert strict.first_divergence is not None
    assert "dtypes differ (float32 vs bfloat16)" in strict.table["note"][0]
    assert tensor_diff(draft, low, **TOLERANCES["bfloat16"], **inputs).first_divergence is None


def test_max_rel_is_the_documented_ratio():
    b = torch.tensor([2.0, -4.0, 0.0, 1.0])
    a = torch.tensor([2.5, -4.0, 0.0, 1.0])
    row = tensor_diff({"x": a}, {"x": b}).table.iloc[0]
    assert row["max_abs"] == pytest.approx(0.5) and row["max_rel"] == pytest.approx(0.25)
    zero = tensor_diff({"x": torch.tensor([1e-3])}, {"x": torch.tensor([0.0])}).table.iloc[0]
    assert zero["max_rel"] == pytest.approx(1e-3 / td.TINY)


def test_nan_on_one_side_diverges_and_on_both_does_not():
    x = torch.tensor([1.0, float("nan")])
    assert not tensor_diff({"x": x}, {"x": x.clone()}).table["diverges"][0]
    one = tensor_diff({"x": x}, {"x": torch.tensor([1.0, 2.0])})
    assert one.first_divergence == "x" and one.table["max_abs"][0] == float("inf")
    assert "NaN on one side" in one.table["note"][0] and one.to_dict()["points"][0]["max_abs"] is None


# ------------------------------------------------------------------ names, order, one-sided points

def test_only_shared_points_are_compared_and_the_rest_listed(draft, inputs, trace):
    partial = {n: t for n, t in trace.items() if n != "layers.0.self_attn.hook_q"}
    partial["engine.extra"] = torch.zeros(1)
    diff = tensor_diff(draft, partial, **inputs)
    assert diff.only_in_a == ("layers.0.self_attn.hook_q",) and diff.only_in_b == ("engine.extra",)
    assert "layers.0.self_attn.hook_q" not in set(diff.table["name"]) and diff.first_divergence is None
    assert "only by" in diff.summary()


def test_bare_first_layer_names_in_a_trace_match_the_draft(draft, inputs, trace):
    bare = {n.removeprefix("layers.0."): t for n, t in trace.items()}
    assert "hook_residual" in bare and "self_attn.hook_q" in bare
    bare["hook_residual"] = bare["hook_residual"] + 1.0
    diff = tensor_diff(bare, draft, **inputs)
    assert diff.first_divergence == "layers.0.hook_residual"
    assert list(diff.table["name"]) == fired(draft, inputs)   # the draft's order, though it is side b


def test_a_trace_with_eagle3lab_0_1_names_is_read_with_one_warning(draft, inputs, trace):
    old = {re.sub(r"(self_attn\.)?hook_", "", n): t for n, t in trace.items()}   # fc_out, layers.0.q, ...
    assert "fc_out" in old and "layers.0.q" in old and "layers.0.residual" in old
    old["layers.0.resid_mid"] = old["layers.0.resid_mid"] + 1.0
    with pytest.warns(DeprecationWarning, match=r"'fc_out' -> 'hook_fc_out'.*'layers.0.q' -> "
                                                r"'layers.0.self_attn.hook_q'") as caught:
        diff = tensor_diff(draft, old, **inputs)
    assert len([w for w in caught if w.category is DeprecationWarning]) == 1
    assert diff.first_divergence == "layers.0.hook_resid_mid" and diff.only_in_b == ()
    assert list(diff.table["name"]) == fired(draft, inputs)
    with pytest.warns(DeprecationWarning, match="'residual' -> 'layers.0.hook_residual'"):
        picked = tensor_diff(draft, trace, names=["residual"], **inputs)
    assert list(picked.table["name"]) == ["layers.0.hook_residual"]


def test_names_select_points_and_unknown_names_are_refused(draft, inputs, trace):
    diff = tensor_diff(draft, trace, names=["hook_fc_out", "hook_residual", "layers.0.hook_mlp_*"], **inputs)
    assert list(diff.table["name"]) == ["hook_fc_out", "layers.0.hook_residual", "layers.0.hook_mlp_in",
                                        "layers.0.hook_mlp_out"]
    with pytest.raises(Eagle3LabError, match="no_such_point"):
        tensor_diff(draft, trace, names=["no_such_point"], **inputs)


def test_two_traces_follow_the_order_of_a():
    a = {"z": torch.ones(2), "m": torch.ones(2), "a": torch.ones(2)}
    b = {"a": torch.ones(2), "z": torch.ones(2), "m": torch.zeros(2)}
    diff = tensor_diff(a, b)
    assert list(diff.table["name"]) == ["z", "m", "a"] and diff.first_divergence == "m"
    with pytest.raises(Eagle3LabError, match="both sides are traces"):
        tensor_diff(a, b, input_ids=torch.zeros(1, 1, dtype=torch.long))
    with pytest.raises(Eagle3LabError, match="a draft"):
        tensor_diff([1, 2], b)


# ------------------------------------------------------------------ traces on disk

def test_load_trace_names_the_file_when_missing_or_not_safetensors(tmp_path):
    with pytest.raises(Eagle3LabError, match="nope.safetensors.*no such file"):
        load_trace(tmp_path / "nope.safetensors")
    pickled = tmp_path / "dump.pt"
    torch.save({"hook_fc_out": torch.ones(2)}, pickled)
    with pytest.raises(Eagle3LabError, match="dump.pt.*not read"):
        load_trace(pickled)


def test_save_trace_is_atomic(tmp_path, trace, monkeypatch):
    path = save_trace(tmp_path / "t.safetensors", {"a": torch.ones(3)})
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("safetensors.torch.save_file", broken)
    with pytest.raises(OSError, match="disk full"):
        save_trace(path, trace)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["t.safetensors"]
    with pytest.raises(Eagle3LabError, match="a tensor per hook name"):
        save_trace(tmp_path / "u.safetensors", {"a": [1, 2]})
    assert not (tmp_path / "u.safetensors").exists()


def test_save_trace_keeps_tensors_that_share_memory(draft, inputs, tmp_path):
    flagged = draft.rewired(norm_before_residual=True)   # hook_residual is the hook_hid_normed tensor itself
    with torch.no_grad():
        _, cache = flagged.run_with_cache(**inputs)
    assert cache["hook_residual"].data_ptr() == cache["hook_hid_normed"].data_ptr()
    back = load_trace(save_trace(tmp_path / "shared.safetensors", cache))
    assert torch.equal(back["layers.0.hook_residual"], cache["layers.0.hook_hid_normed"]) and list(back) == list(cache)


# ------------------------------------------------------------------ summary, to_dict, plot

def test_to_dict_is_plain_json_and_summary_names_both_sides(draft, inputs):
    diff = tensor_diff(draft, draft.rewired(norm_before_residual=True), **inputs)
    d = json.loads(json.dumps(diff.to_dict(), allow_nan=False))
    assert d["first_divergence"] == "layers.0.hook_residual" and len(d["points"]) == len(diff.table)
    assert d["summary"] == diff.summary() and diff.label_a in d["summary"] and diff.label_b in d["summary"]


def test_plot_marks_the_first_divergence_and_names_both_sides(draft, inputs, trace):
    cut = dict(trace)
    cut["layers.0.self_attn.hook_v"] = trace["layers.0.self_attn.hook_v"][:1]
    diff = tensor_diff(draft.rewired(norm_before_residual=True), cut, **inputs)
    fig = plot_tensor_diff(diff)
    ax = fig.axes[0]
    assert diff.label_a in ax.get_title() and diff.label_b in ax.get_title() and "layers.0.hook_residual" in ax.get_title()
    assert ax.get_yscale() == "log"
    marks = [ln for ln in ax.lines if ln.get_label().startswith("first divergence")]
    assert len(marks) == 1 and marks[0].get_xdata()[0] == list(diff.table["name"]).index("layers.0.hook_residual")
    assert [t.get_text() for t in ax.get_xticklabels()] == list(diff.table["name"])
    assert plot_tensor_diff(diff, title="mine").axes[0].get_title() == "mine"


def test_the_tolerance_is_allclose_with_atol_in_units_of_the_rms_of_b():
    b = torch.tensor([3.0, 4.0])                      # rms(b) = 3.5355...
    bound = 0.1 * 3.5355339 + 0.01 * 3.0              # element 0's allowance at atol=0.1, rtol=0.01
    for excess, flagged in [(-1e-4, False), (1e-4, True)]:
        a = b + torch.tensor([bound + excess, 0.0])
        assert bool(tensor_diff({"x": a}, {"x": b}, atol=0.1, rtol=0.01).table["diverges"][0]) is flagged
    plain = 0.1 + 0.01 * 3.0                          # atol_unit="abs": torch.allclose's own allowance
    for excess, flagged in [(-1e-4, False), (1e-4, True)]:
        a = b + torch.tensor([plain + excess, 0.0])
        assert bool(tensor_diff({"x": a}, {"x": b}, atol=0.1, rtol=0.01, atol_unit="abs").table["diverges"][0]) \
            is flagged
    with pytest.raises(Eagle3LabError, match="atol_unit"):
        tensor_diff({"x": b}, {"x": b}, atol_unit="relative")
