"""Callers read typed fields, never display labels or message text (issue 34)."""

import pytest

from eagle3lab.engines.layer_ids import to_engine_ids
from eagle3lab.errors import Eagle3LabError, UncapturablePoints, bad_input
from eagle3lab.readings.nb06_case_file import checklist


def test_uncapturable_points_carry_what_was_tried_beside_the_message():
    # SGLang 0.5.21's llama.py cannot capture the embedding output (resid[0]) under any ids
    with pytest.raises(UncapturablePoints) as info:
        to_engine_ids("sglang", [0, 3, 7], 12, arch="LlamaForCausalLM", engine_version="0.5.21")
    err = info.value
    assert isinstance(err, Eagle3LabError) and str(err) == f"{err.headline}. {err.advice}"
    assert err.headline.startswith("sglang: cannot capture ['resid[0] (embedding)', 'resid[3]', 'resid[7]'] for N = 12, arch LlamaForCausalLM")
    assert err.headline.endswith("Tried: " + "; ".join(err.tried)) and len(err.tried) == 2
    assert err.tried[0].startswith("[-1, 2, 6] -> ") and err.advice.startswith("Choose other points")
    # the checklist states the same tries, taken from the field
    df = checklist((0, 3, 7), False, 12, "LlamaForCausalLM", {"sglang": ["0.5.21"]}, 4, {"sglang": True}, {"sglang": "k"})
    assert df.iloc[0]["cannot honour"] == f"the ids for [resid[0] (embedding), resid[3], resid[7]] ({'; '.join(err.tried)})"


def test_a_plain_error_headline_is_its_whole_message():
    err = bad_input("flags", "num_steps", "an integer", "'x'")
    assert err.headline == str(err) == "flags: key 'num_steps': expected an integer, found 'x'."


def test_the_cap_verdict_reads_launch_readings_and_the_table_only_labels_them():
    from eagle3lab.engines.flags import resolve_flags
    from eagle3lab.readings.nb01_config_flags import LaunchReading, cap_verdict, demo_table

    readings = [LaunchReading("as launched", 2, 1.6, 2, 2), LaunchReading("fixed", 5, 2.9, 5, 5)]
    table = demo_table(readings)
    assert list(table.columns) == ["verified per round", "tau (measured)", "most tokens in one round", "cap"]
    assert table.loc["fixed", "tau (measured)"] == 2.9 and table.loc["as launched", "cap"] == 2
    res = resolve_flags("sglang", "python -m sglang.launch_server --speculative-algorithm EAGLE3 "
                        "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5")
    v = cap_verdict(res, readings, alpha=0.7, ran=1, wanted=4, command="cmd", draft="D", target="T")
    assert (v.claims["tau_as_given"], v.claims["tau_fixed"], v.claims["most_in_a_round"]) == (1.6, 2.9, 2)
    assert v.claims["fixed_longer"] and v.claims["adjusted"] and "**tau 1.60**" in v.text


def test_the_chain_choice_exposes_its_mean_projection_and_the_cap_codes_name_the_rule():
    from eagle3lab.analysis.cost_model import CostModel
    from eagle3lab.engines.flags import resolve_flags
    from eagle3lab.engines.flags.sglang import CHAIN_CAP_CODES
    from eagle3lab.readings.nb06_case_file import choose_chain

    runs = [CostModel(device="cpu", context_len=10, target_step_s=1.0, draft_step_s=d,
                      verify_s={1: 1.0, 2: 1.1, 4: 1.3, 8: 1.7}, extend_s={1: 0.1, 2: 0.12, 3: 0.14, 4: 0.16})
            for d in (0.05, 0.06, 0.08)]
    choice = choose_chain(runs, [0.8, 0.6, 0.4])
    assert [round(x, 3) for x in choice.mean_projected] == choice.table()["projected speedup (mean of repeats)"].tolist()
    assert choice.mean_projected == pytest.approx([choice.projected[k].mean() for k in (1, 2, 3)])
    res = resolve_flags("sglang", "python -m sglang.launch_server --speculative-algorithm EAGLE3 "
                        "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5")
    assert [c for c in res.codes() if c in CHAIN_CAP_CODES] == ["SGL_TOPK1_DRAFT_TOKENS_ADJUSTED"]
