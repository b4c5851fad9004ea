"""Notebook 02's claims about SGLang's aux ids, asserted from the notebook's own run and from the
translator it calls (eagle3lab.engines.layer_ids, read in SGLang's release wheels 0.5.4-0.5.23).

The capture itself (three paths bit-identical, HF's normed last state) is asserted where it is built
(tests/models); here: which releases read the edge-case ids how, and the seed's Kimi-K2 wiring.
"""

from __future__ import annotations

import pytest
from helpers.notebooks import notebook_claims, notebook_summary

from eagle3lab.engines.layer_ids import resolve_aux_layers

NOTEBOOK = "02_hidden_state_capture.ipynb"
BUILDS = ["0.5.12", "0.5.13", "0.5.14", "0.5.21", "0.5.22", "0.5.23"]


@pytest.fixture(scope="module")
def nb(bundled_models):
    return notebook_claims(NOTEBOOK)


def test_the_edge_case_ids_per_release(nb):
    assert nb["num_layers"] == 12 and nb["sglang_builds"] == BUILDS
    edge = nb["edge_cases"]
    # id N-1: loop index N is never reached, in every release
    assert set(edge["LlamaForCausalLM [1, 6, 11]"].values()) == {"BREAKS resid[2, 7]"}
    # id -1 on llama.py: a TypeError up to 0.5.21, resid[0] from 0.5.22 (the layer boundary)
    llama = edge["LlamaForCausalLM [-1, 2, 6]"]
    assert [llama[v] for v in BUILDS] == ["BREAKS resid[0, 3, 7]"] * 4 + ["resid[0, 3, 7]"] * 2
    # qwen2.py (Qwen2, Qwen3): the bare hidden states, resid[0], in every release
    assert set(edge["Qwen3ForCausalLM [-1, 2, 6]"].values()) == {"resid[0, 3, 7]"}
    # deepseek_v2.py: +1 before PR #25454 (0.5.12); as-is since, a TypeError at loop index 0 in 0.5.13, resid[0] from 0.5.14
    deepseek = edge["DeepseekV3ForCausalLM [0, 2, 6]"]
    assert [deepseek[v] for v in BUILDS] == ["resid[1, 3, 7]", "BREAKS resid[0, 2, 6]"] + ["resid[0, 2, 6]"] * 4


def test_the_model_files_the_text_names(nb):
    def reads(arch, ids, version):
        res = resolve_aux_layers("sglang", ids, 12, arch=arch, engine_version=version)
        return list(res.resid), res.fatal

    typeerror = "TypeError"
    for arch, ids, last_without, first_with in [("LlamaForCausalLM", [-1, 2, 6], "0.5.21", "0.5.22"),
                                                ("DeepseekV3ForCausalLM", [0, 2, 6], "0.5.13", "0.5.14"),
                                                ("Glm4MoeLiteForCausalLM", [0, 2, 6], "0.5.20", "0.5.21"),
                                                ("GptOssForCausalLM", [-1, 2, 6], "0.5.16", "0.5.17")]:
        resid, fatal = reads(arch, ids, last_without)
        assert resid[0] == 0 and fatal and typeerror in fatal[0], (arch, fatal)
        resid, fatal = reads(arch, ids, first_with)
        assert resid[0] == 0 and not fatal, (arch, fatal)
    assert "0.5.4-0.5.21" in reads("LlamaForCausalLM", [-1, 2, 6], "0.5.21")[1][0]     # every wheel read
    assert not reads("Qwen3MoeForCausalLM", [-1, 2, 6], "0.5.12")[1]
    _, fatal = reads("Qwen3MoeForCausalLM", [1, 6, 11], None)
    assert "IndexError" in fatal[0] and "start-up" in fatal[0]
    # an architecture whose model file was not read is not confirmed, and never offered -1
    res = resolve_aux_layers("sglang", [-1, 2, 6], 12, arch="DeepseekV4ForCausalLM")
    assert res.unconfirmed


def test_the_seed_wiring_on_kimi_k2_per_release(nb):
    """[embedding, resid[3], resid[31]] on DeepseekV3ForCausalLM, N = 61."""
    kimi = nb["kimi_sglang_ids"]
    assert list(kimi) == BUILDS
    assert kimi["0.5.12"] is None and kimi["0.5.13"] is None
    assert all(kimi[v] == [0, 3, 31] for v in BUILDS[2:])
    # the team's ids [-1, 2, 30]: a TypeError before PR #25454, a state missing since, in every release
    for version, broken in [("0.5.12", "TypeError"), ("0.5.13", "never reached"), ("0.5.23", "never reached")]:
        res = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch="DeepseekV3ForCausalLM", engine_version=version)
        assert res.fatal and broken in res.fatal[0], (version, res.fatal)
    text = notebook_summary(NOTEBOOK)
    assert ("SGLang's deepseek_v2.py cannot express it in 0.5.12, 0.5.13 and needs ids [0, 3, 31] in 0.5.14, "
            "0.5.21, 0.5.22, 0.5.23") in text
    assert "vLLM cannot capture it (its deepseek_v2.py crashes on id 0)" in text


def test_the_neighbour_words_follow_the_cosines(nb):
    """The bundled target's resid[0] -> resid[1] has a negative cosine: the summary must not call every
    off-by-one a mild degradation (the old "degrades rather than breaks")."""
    text = notebook_summary(NOTEBOOK)
    assert "degrades rather than breaks" not in text
    low, pair = nb["neighbour_cosine_min"], nb["least_similar_pair"]
    assert low < 0 and pair == "resid[0] vs resid[1]"
    assert f"but {pair} only {low:.3f}: an off-by-one there feeds the draft an unrelated state" in text
    assert nb["neighbour_cosine"] > low


def test_no_model_ids_or_depth_below_the_parameters_cell():
    import json

    from eagle3lab import bundled

    cells = json.loads((bundled.ROOT / "notebooks" / NOTEBOOK).read_text())["cells"]
    params = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    assert all(key in "".join(cells[params]["source"]) for key in ("DTYPE", "DEVICE_MAP", "TRUST_REMOTE_CODE = False"))
    below = "".join("".join(c["source"]) for c in cells[params + 1:] if c["cell_type"] == "code")
    for literal in ("DeepseekV3ForCausalLM", "[2, 30, 58]", "[0, 3, 31]", "[-1, 2, 30]", ", 61,", "Kimi"):
        assert literal not in below, literal


def test_the_similarity_heatmap_has_a_signed_scale_and_a_labelled_colorbar():
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from eagle3lab.analysis.plots import plot_resid_similarity

    names = ["resid[0]", "resid[1]"]
    ax = plot_resid_similarity(pd.DataFrame([[1.0, -0.036], [-0.036, 1.0]], index=names, columns=names))
    image = ax.images[0]
    assert image.get_clim() == (-1, 1) and image.get_cmap().name == "RdBu_r"
    assert image.colorbar.ax.get_ylabel() == "cosine similarity (-1 .. 1)"
    assert image.norm(-0.036) < 0.5 < image.norm(0.5)          # a negative cosine sits below the centre
