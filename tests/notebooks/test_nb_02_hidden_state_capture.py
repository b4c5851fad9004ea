"""Notebook 02's claims about SGLang's aux ids, asserted from the notebook's own run and from the
translator it calls (eagle3lab.engines.layer_ids, read in SGLang's release wheels 0.5.4-0.5.23).

The capture itself (three paths bit-identical, HF's normed last state) is asserted where it is built
(tests/models); here: which releases read the edge-case ids how, and the seed's Kimi-K2.5 wiring.
"""

from __future__ import annotations

import pytest
from helpers.notebooks import notebook_claims, notebook_summary, run_with_parameters
from helpers.parameters import assert_parameters_hold_the_literals, parameters_and_code_below

from eagle3lab.app.workbook import NOTEBOOKS
from eagle3lab.engines.flags import SEED_TARGET_CONFIG
from eagle3lab.engines.flags.configs import config_value, first_arch
from eagle3lab.engines.layer_ids import AT_DRAFT_FC, resolve_aux_layers
from eagle3lab.engines.profiles import PROFILES
from eagle3lab.readings.seed_case import SEED_BUILD, SEED_RECORD

NOTEBOOK = "02_hidden_state_capture.ipynb"
BUILDS = [SEED_BUILD, "0.5.12", "0.5.13", "0.5.14", "0.5.21", "0.5.22", "0.5.23"]
KIMI_K25 = "KimiK25ForConditionalGeneration"


@pytest.fixture(scope="module")
def nb(bundled_models):
    return notebook_claims(NOTEBOOK)


def test_the_edge_case_ids_per_release(nb):
    assert nb["num_layers"] == 12 and nb["sglang_builds"] == BUILDS and nb["mode"] == "live"
    edge = nb["edge_cases"]
    # id N-1: loop index N is never reached, in every release
    assert set(edge["LlamaForCausalLM [1, 6, 11]"].values()) == {"BREAKS resid[2, 7]"}
    # id -1 on llama.py: a TypeError up to 0.5.21, resid[0] from 0.5.22 (the layer boundary)
    llama = edge["LlamaForCausalLM [-1, 2, 6]"]
    assert [llama[v] for v in BUILDS] == ["BREAKS resid[0, 3, 7]"] * 5 + ["resid[0, 3, 7]"] * 2
    # qwen2.py (Qwen2, Qwen3): the bare hidden states, resid[0], in every release
    assert set(edge["Qwen3ForCausalLM [-1, 2, 6]"].values()) == {"resid[0, 3, 7]"}
    # deepseek_v2.py: +1 before PR #25454 (0.5.12); as-is since, a TypeError at loop index 0 in 0.5.13, resid[0] from 0.5.14
    deepseek = edge["DeepseekV3ForCausalLM [0, 2, 6]"]
    assert [deepseek[v] for v in BUILDS] == ["resid[1, 3, 7]"] * 2 + ["BREAKS resid[0, 2, 6]"] + ["resid[0, 2, 6]"] * 4


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


def test_the_seed_wiring_on_kimi_k25_per_release(nb):
    """[embedding, resid[3], resid[31]] on the seed's own target (eagle3lab.SEED_TARGET_CONFIG: Kimi-K2.5), N = 61."""
    kimi = nb["case_ids_per_build"]
    assert nb["case_arch"] == first_arch(SEED_TARGET_CONFIG) == KIMI_K25
    assert nb["case_num_layers"] == config_value(SEED_TARGET_CONFIG, "num_hidden_layers") == 61
    assert list(kimi) == BUILDS
    assert kimi["0.5.11"] is None and kimi["0.5.12"] is None and kimi["0.5.13"] is None
    assert all(kimi[v] == [0, 3, 31] for v in BUILDS[3:])
    # the team's ids [-1, 2, 30]: a TypeError before PR #25454, a state missing since; from 0.5.17 the count check
    # stops the first forward (an assert, a RuntimeError from 0.5.20)
    for version, broken in [("0.5.12", "TypeError"), ("0.5.13", "never reached"), ("0.5.23", "RuntimeError")]:
        res = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch=KIMI_K25, engine_version=version)
        assert res.fatal and broken in res.fatal[0], (version, res.fatal)
    text = notebook_summary(NOTEBOOK)
    assert ("SGLang's deepseek_v2.py cannot express it in 0.5.11, 0.5.12, 0.5.13 and needs ids [0, 3, 31] in 0.5.14, "
            "0.5.21, 0.5.22, 0.5.23") in text
    assert "vLLM cannot capture it (deepseek_v2.py: id 0 raises TypeError)" in text and nb["faithful_ids"] is None
    # what the team's ids serve per build: a crash before #25454, then two states the draft's three-slot fc rejects
    assert nb["team_ids_serve"]["0.5.12"] == "nothing: crashes at the first forward"
    assert all(nb["team_ids_serve"][v] == f"nothing: it stops {AT_DRAFT_FC}" for v in ("0.5.13", "0.5.14"))
    assert all(nb["team_ids_serve"][v] == "nothing: crashes at the first forward" for v in BUILDS[4:])
    # one reading, every engine that reads the written ids so
    assert ("[2, 30, 58] on KimiK25ForConditionalGeneration (N = 61) mean [resid[3], resid[31], resid[59]] to SGLang "
            "pre-#25454, SpecForge pre-#25454; [resid[2], resid[30], resid[58]] to SGLang post-#25454") in text


def test_the_neighbour_words_follow_the_cosines(nb):
    """The bundled target's resid[0] -> resid[1] has a negative cosine: the summary must not call every
    off-by-one a mild degradation (the old "degrades rather than breaks")."""
    text = notebook_summary(NOTEBOOK)
    assert "degrades rather than breaks" not in text
    low, pair = nb["neighbour_cosine_min"], nb["least_similar_pair"]
    assert low < 0 and pair == "resid[0] vs resid[1]"
    assert f"but {pair} only {low:.3f}: an off-by-one there feeds the draft an unrelated state" in text
    assert nb["neighbour_cosine"] > low


def test_the_paths_words_count_three_paths_only_where_three_can_agree(nb):
    """Issue 35: HF's last entry is normed, so at resid[N] only the two hook paths agree; the summary counts
    three paths on resid[0..N-1] and says so of resid[N] from the table, not "13/13 identical"."""
    import pandas as pd

    from eagle3lab.readings.nb02_hidden_state_capture import _paths_words

    text = notebook_summary(NOTEBOOK)
    assert nb["points"] == 12 and nb["identical_points"] == 12 and nb["last_hooks_identical"]
    assert ("three independent capture paths agree bit for bit on every point resid[0..11] (12/12 identical); at "
            f"resid[12] the two hook paths agree bit for bit, while HF's last hidden state differs from it by up to "
            f"{nb['last_hidden_gap']:.2f} (it is normed") in text and nb["last_hidden_gap"] > 0
    # a table the test builds: one inner point off and the hooks apart at resid[N] are said, with their numbers
    table = pd.DataFrame({"pre vs post": [0.0, 0.5, 0.25], "HF hidden_states[k] vs pre": [0.0, 0.5, 3.0],
                          "bit-identical": [True, False, False]}, index=["resid[0]", "resid[1]", "resid[2]"])
    claims = {}
    words = _paths_words(table, "T", 2, claims)
    assert "agree bit for bit on 1 of the 2 points resid[0..1]" in words and "hook paths differ by 0.25" in words
    assert claims == {"identical_points": 1, "points": 2, "last_hooks_identical": False, "last_hidden_gap": 3.0}


def test_no_model_ids_or_depth_below_the_parameters_cell():
    import json

    from eagle3lab import bundled

    assert_parameters_hold_the_literals(NOTEBOOKS / NOTEBOOK, set(PROFILES) | {"LlamaForCausalLM", "DeepseekV3ForCausalLM",
                                                                               KIMI_K25})
    cells = json.loads((bundled.ROOT / "notebooks" / NOTEBOOK).read_text())["cells"]
    params = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    below = "".join("".join(c["source"]) for c in cells[params + 1:] if c["cell_type"] == "code")
    for literal in ("DeepseekV3ForCausalLM", KIMI_K25, "[2, 30, 58]", "[0, 3, 31]", "[-1, 2, 30]", ", 61,", "Kimi"):
        assert literal not in below, literal
    # nor does the prose below the parameters name the worked example's model, depth or ids (the model files'
    # coverage, "deepseek_v2.py (DeepSeek-V2/V3/V3.2, Kimi-K2/K2.5)", is engine knowledge and stays)
    prose = "".join("".join(c["source"]) for c in cells[params + 1:] if c["cell_type"] == "markdown")
    for literal in ("Kimi-K2 /", "Kimi-K2 example", "N = 61", "61-layer", "[2, 30, 58]", "[-1, 2, 30]", "[0, 3, 31]"):
        assert literal not in prose, literal


def test_the_dump_and_config_only_parameters_default_to_loading_the_target():
    params, _ = parameters_and_code_below(NOTEBOOKS / NOTEBOOK)
    assert {k: params[k] for k in ("DUMP_DIR", "TARGET_HEAD", "DUMP_LAYER_IDS", "NUM_LAYERS", "ARCH")} == dict.fromkeys(
        ("DUMP_DIR", "TARGET_HEAD", "DUMP_LAYER_IDS", "NUM_LAYERS", "ARCH"))
    assert params["ENGINE"] in PROFILES and params["FAITHFUL_ENGINE"] in PROFILES
    assert all(engine in PROFILES for engine, _ in params["CASE_READINGS"])


def _run_with(parameters):
    return run_with_parameters(NOTEBOOK, parameters, timeout=300)


@pytest.mark.notebook
@pytest.mark.timeout(600)
def test_config_only_mode_runs_the_id_tables_for_a_target_it_cannot_load():
    """NUM_LAYERS / ARCH: nothing loaded (TARGET points nowhere), the release table read for that depth and
    architecture, every cell that needs the model says so."""
    claims, text, printed = _run_with({"TARGET": "/nonexistent/target", "NUM_LAYERS": 61, "ARCH": "DeepseekV3ForCausalLM"})
    assert claims["mode"] == "config-only" and claims["num_layers"] == 61
    # the edge-case rows at N = 61: id N-1 = 60 is never reached in llama.py, in every build
    assert set(claims["edge_cases"]["LlamaForCausalLM [1, 30, 60]"].values()) == {"BREAKS resid[2, 31]"}
    for what in ("ResidCapture on a forward", "the three capture paths", "the similarity of the residual streams",
                 "the fc inputs from captured states", "writing and reading back a dump"):
        assert f"{what}: needs the loaded target; skipped (config-only mode" in printed, what
    assert "identical_points" not in claims and "neighbour_cosine" not in claims and "dump_identical" not in claims
    assert text.startswith("On a DeepseekV3ForCausalLM (N = 61, config only): nothing loaded, so only the id tables ran")
    assert "needs ids [0, 3, 31] in 0.5.14" in text          # the worked example does not need the model


@pytest.mark.notebook
@pytest.mark.timeout(600)
def test_dump_mode_reads_the_states_a_cluster_wrote_instead_of_loading_the_target(bundled_models, tmp_path):
    """DUMP_DIR + TARGET_HEAD: the similarity is computed on the dumped points only (each with the next one held),
    the target is not loaded (TARGET points nowhere), and its depth comes from TARGET_HEAD's config."""
    import torch

    from eagle3lab import bundled
    from eagle3lab.models.capture import capture_resid, resid_similarity
    from eagle3lab.models.hidden_dump import dump_hidden_states
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET)
    prompts = ["def f(x):\n    return x + 1", "The residual stream carries every layer forward."]
    dump_hidden_states(target, prompts, tmp_path / "dump", points=[0, 1, 6, 12], batch_size=1, progress=False)
    claims, text, printed = _run_with({"TARGET": "/nonexistent/target", "DUMP_DIR": str(tmp_path / "dump"),
                                       "TARGET_HEAD": str(bundled.TARGET)})
    assert claims["mode"] == "dump" and claims["num_layers"] == 12
    assert "identical_points" not in claims and "dump_identical" not in claims
    assert "the three capture paths: needs the loaded target; skipped (dump mode" in printed
    # the cosines are those of the dumped states: recomputed here from the same prompts
    batch = target.encode(prompts)
    with torch.no_grad():
        sim = resid_similarity(capture_resid(target, batch["input_ids"], [0, 1, 6, 12], batch["attention_mask"]),
                               batch["attention_mask"])
    pairs = {"resid[0] vs resid[1]": sim.iloc[0, 1], "resid[1] vs resid[6]": sim.iloc[1, 2],
             "resid[6] vs resid[12]": sim.iloc[2, 3]}
    assert claims["least_similar_pair"] == min(pairs, key=pairs.get)
    assert claims["neighbour_cosine_min"] == pytest.approx(min(pairs.values()), abs=1e-4)
    assert claims["neighbour_cosine"] == pytest.approx(sum(pairs.values()) / 3, abs=1e-4)
    assert "Consecutive dumped points have mean cosine" in text and "read from the cluster's dump" in printed


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


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_measured_speed_sits_beside_the_code(bundled_models):
    """The team's 54.8 tok/s with its fix ids, beside each build's reading (issue 32): the cell names the builds that
    stop and the explanations that fit both."""
    from helpers.notebooks import executed_notebook

    cell = next(c for c in executed_notebook(NOTEBOOK).cells if c.get("id") == "seedtoks2")
    text = "".join(o.get("data", {}).get("text/markdown", "") for o in cell.outputs)
    assert f"The team measured {SEED_RECORD.team_ids_tok_s:g} tok/s with ids [-1, 2, 30]" in text
    assert "0.5.11, 0.5.12, 0.5.13, 0.5.14, 0.5.21, 0.5.22, 0.5.23 stop before serving anything" in text
    assert " run (" not in text and "run as written" not in text and "patched build" in text
    # the table of each build's reading is shown whole: every reason past pandas' 50-character cut, uncut
    import html as html_lib

    from eagle3lab.app.display import TABLE_CLASS
    from eagle3lab.readings.seed_case import measured_beside_code

    shown = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
    seen = measured_beside_code("sglang", [-1, 2, 30], SEED_RECORD.team_ids_tok_s, 61, KIMI_K25, BUILDS)
    long = [t for t in seen.table.to_numpy().ravel() if len(t) > 50]
    assert TABLE_CLASS in shown and long and all(html_lib.escape(t, quote=False) in shown for t in long)


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_no_table_is_cut_anywhere(bundled_models):
    """Issue 35: every table 02 shows holds its text whole (full_text: no cell cut at pandas' 50 characters), and
    every table with text is a full_text one."""
    import re

    from helpers.notebooks import executed_notebook

    from eagle3lab.app.display import TABLE_CLASS

    tables = [t for c in executed_notebook(NOTEBOOK).cells for o in c.get("outputs", [])
              for t in re.findall(r"<table.*?</table>", o.get("data", {}).get("text/html", ""), re.S)]
    assert len(tables) >= 7
    for table in tables:
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", table, re.S)]
        assert not any(c.endswith("...") for c in cells), table[:300]
        texts = [c for c in cells if re.search(r"[A-Za-z]{3}", c)]
        assert TABLE_CLASS in table or all(len(c) < 50 for c in texts), table[:300]


def test_the_seed_numbers_have_one_home():
    """The parameters' literals are readings.seed_case's: the first build read is SEED_BUILD (the first release that
    could serve the seed's Kimi-K2.5), the team's speed with its ids SEED_RECORD's."""
    params, _ = parameters_and_code_below(NOTEBOOKS / NOTEBOOK)
    assert params["SGLANG_BUILDS"] == BUILDS and params["SGLANG_BUILDS"][0] == SEED_BUILD
    assert params["CASE_TEAM_TOK_S"] == SEED_RECORD.team_ids_tok_s


def test_the_seed_story_says_what_the_engine_knowledge_says_a_list_holding_minus_one_does():
    """Issue 35: the markdown above the worked example's table states, per range of builds, where the team's ids stop,
    as the table's rows do (layer_ids.STOPS): a TypeError before PR #25454, the draft's fc refusing the narrower input
    up to the build without the count check, the count check from the one with it; nowhere does the server run."""
    import re

    from eagle3lab.engines.layer_ids import CHANGES, STOPS

    params, _ = parameters_and_code_below(NOTEBOOKS / NOTEBOOK)
    cell = next(c for c in json_cells() if c.get("id") == "46214234")
    prose = re.sub(r"\s+", " ", "".join(cell["source"]))
    plus_one, count = CHANGES["sglang#25454"], CHANGES["sglang-aux-count-assert"]
    error = CHANGES["sglang-aux-count-error"]
    assert f"at the first forward (up to {plus_one.last_without})" in prose
    assert f"Since #25454 ({plus_one.first_with})" in prose
    assert f"up to {count.last_without}, so it stops {AT_DRAFT_FC[:-1]}" in prose
    assert f"from {count.first_with} `deepseek_v2.py`'s count check stops the first forward" in prose
    assert f"a RuntimeError from {error.first_with}" in prose
    assert "server runs" not in prose and "serves nothing" in prose
    # Kimi-K2.5's first servable build is the seed's: the hook's PR and the CUDA-graph fix's, each at its release
    hook, graphs = CHANGES["sglang#19689"], CHANGES["sglang#22836"]
    assert (f"no capture hook in {hook.last_without} (PR #19689, {hook.first_with}), and {graphs.last_without} still "
            f"captures its CUDA graphs with the default aux ids (PR #22836, {graphs.first_with}), so from "
            f"{SEED_BUILD} on a build serves it") in prose and graphs.first_with == SEED_BUILD
    # the edge-case list above agrees: on deepseek_v2.py, since #25454 only id 0 reaches loop index 0, never -1
    edge = re.sub(r"\s+", " ", "".join(next(c for c in json_cells() if c.get("id") == "b88b7bca")["source"]))
    assert (f"only id 0 reaches loop index 0: from {plus_one.first_with} (PR #25454) this file takes as written any "
            "list that does not start with 1, so id -1 is never reached") in edge
    from packaging.version import Version

    releases = [f"0.5.{n}" for n in range(10, 24)]    # from the first build with a capture hook for the seed's target
    stops = {v: resolve_aux_layers("sglang", params["CASE_TEAM_IDS"], params["CASE_NUM_LAYERS"],
                                   arch=params["CASE_ARCH"], engine_version=v).stops for v in releases}
    before, short = STOPS["SGLANG_ID_MINUS1_TYPEERROR"], STOPS["SGLANG_ID_MINUS1_UNREACHED"]
    assert short == AT_DRAFT_FC and None not in stops.values()
    for v, where in stops.items():
        expected = (before if Version(v) <= Version(plus_one.last_without) else
                    short if Version(v) <= Version(count.last_without) else STOPS["SGLANG_ID_MINUS1_STOPPED"])
        assert where == expected, (v, where)


def json_cells() -> list:
    import json

    return json.loads((NOTEBOOKS / NOTEBOOK).read_text())["cells"]
