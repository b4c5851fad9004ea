"""Readings key their results stably and keep display labels for display (issue 34): hypotheses by key, the
scale sweep by factor, the rules by value, frames by snake_case columns relabelled only to be shown."""

from types import SimpleNamespace

import pandas as pd
import pytest

from eagle3lab.analysis.hypotheses import Hypothesis, compare_wirings
from eagle3lab.analysis.verdicts import Measured
from eagle3lab.engines.layer_ids import ID_MINUS1_CODES, NOTE_CODES, resolve_aux_layers
from eagle3lab.readings import nb04_decoder_norm_split as rules
from eagle3lab.readings.nb02_hidden_state_capture import id_minus1_note

# per prompt: tokens and rounds (tau = tokens / rounds), four prompts
TAUS = {(0, 3, 7): [30, 28, 32, 29], (3, 7, 11): [20, 19, 22, 18], (7, 3, 0): [29, 28, 31, 30]}


def _draft():
    settings = SimpleNamespace(norm_before_residual=True)
    return SimpleNamespace(settings=settings, variants=lambda: [{"norm_before_residual": True}])


def _scorer(wiring, variant):
    rounds = 10 if variant["norm_before_residual"] else 20
    return Measured(tuple(TAUS[tuple(wiring)]), (rounds,) * 4)


def test_hypotheses_are_read_by_key_and_shown_by_label():
    comp = compare_wirings(SimpleNamespace(num_layers=12), _draft(), {
        "trained": Hypothesis((0, 3, 7), True, "as trained"),
        "served": Hypothesis((3, 7, 11), False, "as SGLang serves it"),
        ("reordered", (7, 3, 0)): Hypothesis((7, 3, 0), True, "reordered [7, 3, 0]")}, "trained",
        num_steps=2, scorer=_scorer)
    assert comp.tau("trained") == pytest.approx(119 / 40) and comp.tau("served") == pytest.approx(79 / 80)
    assert comp.verdict("served").name == "as SGLang serves it" and comp.verdict("served").word == "loses"
    assert comp.verdict(("reordered", (7, 3, 0))) is comp.verdicts["reordered [7, 3, 0]"]
    assert comp.reference == "as trained" and list(comp.claims()) == ["as trained", "as SGLang serves it",
                                                                      "reordered [7, 3, 0]"]
    assert comp.verdict("served").sentence().startswith("as SGLang serves it: tau 0.99 [")
    assert "loses" in comp.words() and "to as trained" in comp.words()
    # a (wiring, rule) pair is labelled by its key, as before
    plain = compare_wirings(SimpleNamespace(num_layers=12), _draft(), {"t": ((0, 3, 7), True)}, "t", num_steps=2,
                            scorer=_scorer)
    assert plain.verdict("t") is plain.verdicts["t"] and plain.scores["t"].value == pytest.approx(119 / 40)
    with pytest.raises(ValueError, match="share a label"):
        compare_wirings(SimpleNamespace(num_layers=12), _draft(), {"a": Hypothesis((0, 3, 7), True, "x"),
                                                                   "b": Hypothesis((3, 7, 11), True, "x")},
                        "a", num_steps=2, scorer=_scorer)


def test_the_scale_sweep_is_read_by_factor():
    off = Measured((8, 9, 7, 8), (10,) * 4)
    sweep = rules.scale_sweep(off, {0.5: Measured((2, 3, 2, 2), (10,) * 4), 1.0: Measured((3, 3, 2, 4), (10,) * 4),
                                    3.7: Measured((8, 9, 8, 8), (10,) * 4)})
    assert sweep.flag_off.name == "flag off" and sweep.at(3.7).name == "c = 3.70"
    assert sweep.at(1.0).word == "loses" and sweep.at(3.7).word == "within noise"
    assert list(sweep.claims()) == ["flag off", "c = 0.50", "c = 1.00", "c = 3.70"]
    assert sweep.series().to_dict() == pytest.approx({0.5: 0.225, 1.0: 0.3, 3.7: 0.825})
    with pytest.raises(ValueError, match="two-decimal label"):
        rules.scale_sweep(off, {0.251: off, 0.25: off})


def test_the_residual_balance_and_the_engines_table_are_relabelled_only_to_be_shown():
    balance = pd.DataFrame([{k: 1.0 for k in rules.BALANCE_LABELS}])
    assert list(rules.balance_table(balance).columns) == list(rules.BALANCE_LABELS.values())
    from eagle3lab.analysis.verdicts import compare

    engines = compare({"reference": Measured((3, 3), (1, 1)), "SGLang": Measured((2, 2), (1, 1)),
                       "vLLM": Measured((3, 3), (1, 1))}, "reference")
    shown = rules.engines_table(engines, {"SGLang": False, "vLLM": True}, True)
    assert list(shown.index) == ["SGLang", "vLLM"] and shown["norm_before_residual"].tolist() == [False, True]
    assert "minus norm_before_residual=True" in shown.columns and "minus reference" not in shown.columns


def test_the_id_minus1_note_is_found_by_exact_code():
    assert set(ID_MINUS1_CODES) == {c for c in NOTE_CODES if c.startswith("SGLANG_ID_MINUS1")}
    for version, code in (("0.5.21", "SGLANG_ID_MINUS1_TYPEERROR"), ("0.5.22", "SGLANG_ID_MINUS1_RESID0")):
        res = resolve_aux_layers("sglang", [-1, 2, 6], 12, arch="LlamaForCausalLM", engine_version=version)
        assert id_minus1_note(res) == next(n.text for n in res.notes if n.code == code)
