"""Notebook 06's words on rungs built here: the word shown for a rung that shares the rung before's measurement."""

from dataclasses import replace
from types import SimpleNamespace

import pandas as pd
import pytest

from eagle3lab.doctor.fixes import RunState
from eagle3lab.doctor.ladder import Rung
from eagle3lab.engines.acceptance import Interval
from eagle3lab.readings.nb06_case_file import (
    TAU_LABELS,
    CaseLadder,
    candidates_table,
    lifted_cap_words,
    speed_labels,
)


def _iv(value, low, high):
    return Interval(value, low, high, 0.95, 4)


def _rung(name, word, gain, step):
    state = RunState(True, (0, 3, 7), {"norm_before_residual": False}, 4, engine="sglang", num_draft_tokens=5)
    return Rung(name, state, "WIRING", "note", measured_as=name if step is None or step.value != 1 else "a", tau=_iv(2.0, 1.8, 2.2),
                changed=("ids",), gain=gain, word=word, e2e_tps=10.0, speed=_iv(1.2, 1.1, 1.3), step_speed=step)


def test_a_shared_measurement_reads_identical_as_any_degenerate_interval():
    rungs = [_rung("a", "start", None, None), _rung("b", "identical", _iv(0, 0, 0), _iv(1, 1, 1)),
             _rung("c", "identical", _iv(0, 0, 0), _iv(1.05, 0.9, 1.2))]
    ladder = CaseLadder(rungs, None, 2, "cpu", "float32")
    assert ladder.tau_frame()["verdict"].tolist() == ["start", "identical", "identical"]
    assert ladder.speed_frame()["step_verdict"].tolist() == ["", "identical", "within noise"]
    assert ladder.step_speed_word(rungs[1]) == "the same decoding as the rung before"
    assert "grey: within noise or identical" in ladder.plot().axes[0].get_title()


class _Draft:
    settings = SimpleNamespace(norm_before_residual=False)

    def variants(self):
        return [{"norm_before_residual": (False, True)}]


class _Scorer:
    """Answers as wiring_search.Scorer does: a score whose stats hold c_k and the rounds behind each."""

    draft = _Draft()

    def __init__(self, stats):
        self.stats, self.asked = stats, []

    def __call__(self, wiring, variant):
        self.asked.append((wiring, variant["norm_before_residual"]))
        return SimpleNamespace(stats=self.stats[(wiring, variant["norm_before_residual"])])


def test_step_3_prints_each_rate_of_one_or_zero_with_its_count():
    search = pd.DataFrame({"wiring": ["a", "b"], "aux_resid": [(0, 3, 7), (1, 4, 8)], "norm_before_residual": [True, False],
                           "tau": [3.8251, 1.2], "c1": [0.9, 0.2], "c2": [1.0, 0.0]})
    stats = {((0, 3, 7), True): SimpleNamespace(conditional=[0.9, 1.0], accepted_per_pos=[9, 1], reached_per_pos=[10, 1]),
             ((1, 4, 8), False): SimpleNamespace(conditional=[0.2, 0.0], accepted_per_pos=[2, 0], reached_per_pos=[10, 2])}
    score = _Scorer(stats)
    table = candidates_table(search, score)
    assert table["c1"].tolist() == ["0.900", "0.200"] and table["c2"].tolist() == ["1.000 (1/1)", "0.000 (0/2)"]
    assert table["tau"].tolist() == [3.825, 1.2] and score.asked == [((0, 3, 7), True), ((1, 4, 8), False)]


def test_step_3s_tau_is_placed_as_the_trainer_table_places_it():
    last = _rung("c", "identical", _iv(0, 0, 0), _iv(1, 1, 1))
    last.tau = _iv(2.964, 2.6, 3.3)
    trainer = {"agree": [0.9, 0.8], "tau_est": 3.128, "tau_implied": 3.033}
    ladder = CaseLadder([last], None, 2, "cpu", "float32", trainer)
    above = (_iv(3.825, 3.41, 4.23), "the as-trained set")
    words = ladder.trainer_words(above)
    table = ladder.trainer_table(above)
    assert table["against the last rung's interval"].iloc[2] == "above"
    assert "3.825, is above both the trainer's (3.128 and 3.033) and above the last rung's interval" in words
    assert "is between the trainer's" in ladder.trainer_words((_iv(3.1, 2.9, 3.3), "x"))
    assert "is below both the trainer's" in ladder.trainer_words((_iv(2.9, 2.7, 3.1), "x"))
    assert "inside the last rung's interval" in ladder.trainer_words((_iv(2.9, 2.7, 3.1), "x"))


def test_the_tau_table_is_the_stable_frame_relabelled_to_fit_a_screen():
    """Issue 35: the frame keeps stable column names; the table shown puts the change and its finding in one column
    (a finding's code does not wrap) and wraps every label (no unbroken label widens a column past 1,400 pixels)."""
    rungs = [_rung("a", "start", None, None), _rung("b", "beats", _iv(0.2, 0.1, 0.3), _iv(1.1, 1.0, 1.2))]
    ladder = CaseLadder(rungs, None, 2, "cpu", "float32")
    frame, shown = ladder.tau_frame(), ladder.tau_table()
    assert list(frame.columns) == ["changes", "finding", "engine", "checkpoint", "chain", "ids", "feeds",
                                   "norm_before_residual", "tau", "tau_change", "verdict", "note"]
    assert list(shown.columns) == [TAU_LABELS[c] for c in frame.columns if c != "finding"]
    assert shown["changes (finding)"].tolist() == ["ids (WIRING)"] * 2 and "norm before residual" in shown.columns
    assert shown["tau (95%)"].tolist() == frame["tau"].tolist() and frame["tau_change"].tolist() == ["", "+0.200 [+0.100, +0.300]"]
    assert all(len(word) <= 10 for label in TAU_LABELS.values() for word in label.split())


def test_the_speed_table_is_the_stable_frame_relabelled_for_display():
    """Issue 34: the speed frame keeps stable column names; only the table shown carries the labels, which name the
    speed kind of the ratios (end to end or decode)."""
    rungs = [_rung("a", "start", None, None), _rung("b", "beats", _iv(0.2, 0.1, 0.3), _iv(1.1, 1.0, 1.2)),
             _rung("c", "beats", _iv(0.2, 0.1, 0.3), None)]
    rungs[2].speed = None                      # a rung not timed has no row
    ladder = CaseLadder(rungs, None, 2, "cpu", "float32", speed_kind="decode")
    frame, shown = ladder.speed_frame(), ladder.speed_table()
    assert list(frame.index) == ["1. a", "2. b"]
    assert list(frame.columns) == ["e2e_tps", "speed_ratio", "speed_verdict", "step_ratio", "step_verdict", "identical"]
    assert frame["e2e_tps"].tolist() == [10.0, 10.0] and frame["speed_ratio"].tolist() == ["1.20x [1.10, 1.30]"] * 2
    assert frame["speed_verdict"].tolist() == ["faster", "faster"]
    assert frame["step_ratio"].tolist() == ["", "1.10x [1.00, 1.20]"] and frame["step_verdict"].tolist() == ["", "within noise"]
    assert list(shown.columns) == [speed_labels("decode")[c] for c in frame.columns]
    assert "x no speculation (decode, 95%)" in shown.columns and "x rung before (decode, 95%)" in shown.columns
    assert shown.to_numpy().tolist() == frame.to_numpy().tolist()
    assert "x no speculation (end to end, 95%)" in CaseLadder(rungs, None, 2, "cpu", "float32").speed_table().columns
    assert CaseLadder(rungs[2:], None, 2, "cpu", "float32").speed_table().empty


def _flags_rung(fed, step):
    state = RunState(True, fed, {"norm_before_residual": False}, 15, engine="sglang", num_draft_tokens=16)
    return Rung("cap lifted", state, "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED", "note", measured_as="cap lifted",
                tau=_iv(1.1, 1.0, 1.2), changed=("flags",), gain=_iv(0.03, 0.0, 0.08), word="within noise",
                e2e_tps=5.0, speed=_iv(0.3, 0.2, 0.4), step_speed=step)


def test_the_rung_that_lifts_the_cap_is_set_beside_the_seeds_record():
    """The first timed rung that changes the flags, in the record's words; the reason (drafts rarely accepted while
    fed other states than the trained ones) only where its numbers and its states say so."""
    first, trained = _rung("a", "start", None, None), _rung("z", "beats", _iv(1, 0.5, 1.5), _iv(2, 1.5, 2.5))
    slower = CaseLadder([first, _flags_rung((3, 7, 11), _iv(0.48, 0.46, 0.49)), trained], None, 2, "cpu", "float32")
    words = lifted_cap_words(slower)
    assert words.startswith("The ladder's rung 2 (cap lifted) takes the same step on the bundled case: tau changes by "
                            "+0.030 [+0.000, +0.080] (within noise of the rung before) and the speed (end to end) is "
                            "0.48x [0.46, 0.49] the rung before's (slower), as in the seed's record")
    assert "fed [resid[3], resid[7], resid[11]], not the [resid[0] (embedding), resid[3], resid[7]]" in words
    fed_right = CaseLadder([first, _flags_rung((0, 3, 7), _iv(0.48, 0.46, 0.49)), trained], None, 2, "cpu", "float32")
    faster = CaseLadder([first, _flags_rung((3, 7, 11), _iv(1.3, 1.1, 1.5)), trained], None, 2, "cpu", "float32")
    for ladder in (fed_right, faster):
        assert "as in the seed's record" not in lifted_cap_words(ladder) and lifted_cap_words(ladder).endswith(").")
    assert lifted_cap_words(None) == "" and lifted_cap_words(CaseLadder([first], None, 2, "cpu", "float32")) == ""


STEP = _iv(1.2, 1.1, 1.3)


def _ladder_rung(key, engine, rule, measured_as, tau, changed=(), word="beats", step=STEP, identical=(4, 4)):
    from eagle3lab.readings.nb06_case_file import RUNG_NAMES

    state = RunState(True, (0, 3, 7), {"norm_before_residual": rule}, 15, engine=engine, num_draft_tokens=16)
    return Rung(RUNG_NAMES[key], state, "", "note", measured_as=RUNG_NAMES[measured_as], tau=tau, changed=changed,
                word=word, gain=_iv(0, 0, 0) if word == "identical" else _iv(0.5, 0.2, 0.8), e2e_tps=10.0,
                speed=_iv(1.0, 0.9, 1.1), step_speed=step, identical=identical)


def _case_ladder():
    """The case's rungs 2-6 as the bundled run climbs them: the cap lifted, the team's ids and the ids for the trained
    wiring (one measurement, the rule ignored by sglang), the rule emulated, then vllm serving it whole."""
    low, high = _iv(1.389, 1.182, 2.038), _iv(3.957, 3.333, 4.706)
    rungs = [_ladder_rung("flags", "sglang", False, "flags", _iv(1.122, 1.054, 1.228), word="start", step=None),
             _ladder_rung("team", "sglang", False, "team", low, ("wiring",)),
             _ladder_rung("ids", "sglang", False, "team", low, (), "identical", _iv(1, 1, 1)),
             _ladder_rung("rule", "sglang", True, "rule", high, ("rule",)),
             _ladder_rung("whole", "vllm", True, "whole", high, ("engine",), "identical", _iv(0.97, 0.95, 0.98))]
    for r in rungs:
        r.state = replace(r.state, build="0.5.23") if r.state.engine == "sglang" else r.state
    return CaseLadder(rungs, SimpleNamespace(difference=lambda a, b: _iv(a.tau.value - b.tau.value, 0.1, 0.2)), 2,
                      "cpu", "float32")


def test_each_flag_line_loads_its_engines_format_and_sglang_is_told_it_ignores_the_rule(bundled_models, tmp_path):
    """Issue 35: the checklist's sglang flag line names the checkpoint converted to sglang's format (ids in
    eagle_config, where SGLang reads them), never a description; the words name the convert command, and say that
    served by SGLang the fixed draft runs at the tau of the rungs that ignore the rule, not that of the rungs that
    read it (vLLM), every number from the ladder."""
    from eagle3lab import bundled
    from eagle3lab.models.checkpoint import inspect_checkpoint, load_draft, save_draft
    from eagle3lab.readings.nb06_case_file import ServedFix, checklist, fix_words, served_copies

    fixed = load_draft(bundled.DRAFT_CASE, target=bundled.TARGET, device="cpu").rewired(aux_resid=(0, 3, 7),
                                                                                       norm_before_residual=True)
    path = str(tmp_path / "draft-fixed")
    written = save_draft(fixed, path, "speculators", num_target_layers=12)
    fix = ServedFix("vllm", "speculators", path, written, None, None)
    source = SimpleNamespace(num_layers=12, arch="LlamaForCausalLM",
                             load_draft=lambda p, **kw: load_draft(p, target=bundled.TARGET, **kw))
    copies = served_copies(source, fix, ["sglang", "vllm", "sglang"], "TARGET")
    sgl, vllm = copies["sglang"], copies["vllm"]
    assert (vllm.path, vllm.command) == (path, "") and sgl.path == f"{path}-sglang" and sgl.format == "sglang"
    assert sgl.command == f"eagle3lab convert {path} --to sglang {path}-sglang --target TARGET"
    on_disk = inspect_checkpoint(sgl.path, num_target_layers=12)
    assert sgl.ids == [-1, 2, 6] == on_disk.aux_ids.as_written
    assert sgl.key == on_disk.aux_ids.key == "eagle_config.eagle_aux_hidden_state_layer_ids"
    table = checklist((0, 3, 7), True, 12, "LlamaForCausalLM", {"sglang": ["0.5.23"], "vllm": [None]}, 4,
                      {"sglang": False, "vllm": True}, {e: c.key for e, c in copies.items()},
                      draft={e: c.path for e, c in copies.items()})
    assert f"--speculative-draft-model-path {path}-sglang " in table.loc[("sglang", "0.5.23"), "flag line"]
    assert f'"model": "{path}"' in table.loc[("vllm", "newest"), "flag line"]
    assert table.loc[("sglang", "0.5.23"), "flag line"].startswith("after a retrain with norm_before_residual off")
    assert "after a retrain" not in table.loc[("vllm", "newest"), "flag line"]
    assert table.loc[("sglang", "0.5.23"), "read at"] == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert all("rewritten checkpoint" not in line for line in table["flag line"])
    words = fix_words(fix, 12, copies, _case_ladder())
    assert f"for sglang, `{sgl.command}` wrote it in sglang's format at {path}-sglang (ids [-1, 2, 6] at " \
           "eagle_config.eagle_aux_hidden_state_layer_ids, where sglang reads them" in words
    assert ("but no sglang release reads norm_before_residual (the converted config writes it, sglang ignores it): "
            "served by sglang the fixed draft runs as rungs 2-3 do, the trained points fed and the rule ignored (tau "
            "1.389 [1.182, 2.038] at 15 steps), not at rungs 4-5's 3.957 [3.333, 4.706] with the rule read at the same "
            "chain (rung 4 emulates a "
            "patched sglang no release ships); vllm reads the rule and serves it at that tau (rung 5)") in words
    # without a ladder (nothing climbed) the conversion is named, no tau claimed
    assert "rung" not in fix_words(fix, 12, copies) and sgl.command in fix_words(fix, 12, copies)


def test_two_emulations_decoding_the_same_tokens_time_the_emulators_not_serving():
    """Issue 35: rungs 5 and 6 differ only in the emulated engine and accept the very same tokens: the words keep the
    measured ratio and say it is the emulators' cost on this machine, not a serving fact; no such sentence for a rung
    that changed anything else."""
    ladder = _case_ladder()
    words = ladder.words().splitlines()
    assert words[4].endswith("0.97x [0.95, 0.98] the rung before (slower than the rung before). Only the emulated "
                             "engine changed (sglang -> vllm) and both decode the same tokens (tau change +0.000 "
                             "[+0.000, +0.000], 4/4 token-identical): the 0.97x [0.95, 0.98] is the emulators' cost "
                             "on this cpu, not a serving fact.")
    assert sum("emulators' cost" in w for w in words) == 1
    ladder.rungs[4].identical = (3, 4)            # one output differs: not the same decoding
    assert "emulators' cost" not in ladder.words()


def test_the_chain_rung_cites_no_finding_and_says_where_its_length_comes_from():
    """Issue 35: the last rung's chain is step 4's choice, not an SGLang finding; its note names FIX_STEPS and the
    cost model's set within noise, from the run's numbers."""
    from eagle3lab.readings.nb06_case_file import chain_note

    assert chain_note(4, SimpleNamespace(within_noise=[3, 4], launched=4)) == (
        "4 steps (FIX_STEPS; in the cost model's set 3-4 within noise)")
    assert chain_note(2, SimpleNamespace(within_noise=[3, 4], launched=2)) == (
        "2 steps (FIX_STEPS; not in the cost model's set 3-4 within noise)")
    assert chain_note(4, SimpleNamespace(within_noise=[4], launched=None)) == "4 steps (the top projection; the cost model's pick)"
    assert chain_note(3, SimpleNamespace(within_noise=[1, 3], launched=3)) == (
        "3 steps (FIX_STEPS; in the cost model's set 1, 3 within noise)")
    assert chain_note(4, None) == "4 steps (FIX_STEPS; no round costs timed to price chains with)"
    state = RunState(True, (0, 3, 7), {"norm_before_residual": True}, 4, engine="vllm", num_draft_tokens=5)
    rung = Rung("chain length to launch", state, "", "4 steps", measured_as="c", tau=_iv(2.96, 2.6, 3.4),
                changed=("flags",), gain=_iv(-1, -1.4, -0.6), word="loses", speed=_iv(1.3, 1.1, 1.6),
                step_speed=_iv(1.5, 1.4, 1.6))
    ladder = CaseLadder([_rung("a", "start", None, None), rung], None, 2, "cpu", "float32")
    assert "2. chain length to launch (changes flags): tau 2.96" in ladder.words()
    assert ladder.tau_table()["changes (finding)"].tolist()[1] == "flags"


def test_the_gains_name_the_rungs_they_span_and_the_ids_and_rule_together():
    """Issue 35: each gain the seed's options quote names the rungs it was measured between (from the run), and the
    ids and the rule together are measured from the ids' own start rung (a paired difference of non-adjacent rungs)."""
    from eagle3lab.readings.nb06_case_file import gains_of

    ladder = _case_ladder()
    g = gains_of(ladder)
    assert g.spans == {"wiring": "rung 1 -> 3", "rule": "rung 3 -> 4", "whole": "rung 1 -> 5", "wiring_rule": "rung 1 -> 4"}
    # the ids rung's own tau (points fed, rule ignored) is what a build that ignores the rule serves
    assert (g.ignored.tau.value, g.ignored.steps, g.ignored.rung) == (pytest.approx(1.389), 15, "rung 3")
    assert g.lifted.rung == "rung 1" and g.lifted.tau.value == pytest.approx(1.122)
    assert g.wiring_rule.value == pytest.approx(3.957 - 1.122) and g.rule.value == pytest.approx(3.957 - 1.389)
    assert g.text(g.rule, g.spans["rule"]).endswith("tau on the bundled case's ladder (decoded, 15 steps), rung 3 -> 4")


def test_the_real_engines_counters_print_tau_at_three_digits():
    from eagle3lab.readings.nb06_case_file import real_counters

    counts = {"num_drafts": 55, "num_draft_tokens": 220, "num_accepted_tokens": 108, "tau": 2.963636,
              "accepted_per_pos": [41, 31, 21, 15]}
    table = real_counters({"engine": "vllm", "vllm": counts, "eagle3lab": counts})
    assert table["tau"].tolist() == [2.964, 2.964]


def test_the_speed_caption_says_the_interval_is_over_prompts_with_the_repeats_summed():
    """Issue 35: one basis for every speed interval of the ladder (doctor.ladder: paired over prompts, each prompt's
    repeats summed), in the table's caption and the figure's axis alike; end to end says prefill is in it."""
    ladder = _case_ladder()
    assert ladder.speed_caption == ("The same rungs' speed, end to end (prefill included: every new token over "
                                    "prefill plus decoding), cpu, float32, batch 1; 95% paired bootstrap over prompts "
                                    "(2 repeats summed per prompt)")
    ladder.speed_kind = "decode"
    assert ladder.speed_caption.startswith("The same rungs' speed, decode (tokens after the first over decoding time")
