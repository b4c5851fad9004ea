"""One finding type and one error type with a code (issue 34)."""

import pickle

import pytest

from eagle3lab.errors import Eagle3LabError, UncapturablePoints, bad_input
from eagle3lab.findings import Finding, Severity, first_sentence, worst


def test_one_scale_whose_top_level_keeps_each_outputs_word():
    assert Severity("error").rank == Severity("critical").rank == 0 and Severity.ERROR != Severity.CRITICAL
    assert [s.rank for s in (Severity.WARNING, Severity.INFO)] == [1, 2]
    assert Severity.WARNING.worded(Severity.ERROR) is Severity.WARNING
    assert Severity.CRITICAL.worded(Severity.ERROR) is Severity.ERROR
    # the value is the word printed, in f-strings and JSON alike
    assert f"{Severity.ERROR}" == "error" and Severity.CRITICAL.upper() == "CRITICAL"


def test_a_finding_normalises_its_severity_and_has_no_old_names():
    f = Finding("X_CODE", "error", "The engine crashes. Fix it by hand.", fix="--flag 1", where="num_steps")
    assert f.severity is Severity.ERROR and f.severity.blocking
    assert (f.text, f.where) == ("The engine crashes. Fix it by hand.", "num_steps")
    for old in ("message", "evidence", "setting", "key"):   # one name per field: no pass-through left
        assert not hasattr(f, old), old
    assert f.headline == "The engine crashes." and str(f) == f.text
    with pytest.raises(AttributeError):
        assert f.no_such_field is None
    assert worst([f, Finding("Y", "info", "ok")]) is Severity.ERROR and worst([]) is None
    assert hash(f) == hash(Finding("X_CODE", "error", f.text, "--flag 1", "num_steps", {"k": [1]}))


def test_first_sentence_keeps_versions_and_abbreviations_whole():
    assert first_sentence("vLLM 0.18.0 reads ids. Choose others.\nmore") == "vLLM 0.18.0 reads ids."
    assert first_sentence("e.g. this one") == "e.g. this one"


def test_errors_carry_a_code_and_a_one_line_headline():
    err = bad_input("cfg.json", "eagle_config", "a dict", "a list", "Rewrite the key.", code="CONFIG_SHAPE")
    assert str(err) == "cfg.json: key 'eagle_config': expected a dict, found a list. Rewrite the key."
    assert err.headline == "cfg.json: key 'eagle_config': expected a dict, found a list."
    assert err.code == "CONFIG_SHAPE" and bad_input(None, None, 1, 2).code == "BAD_INPUT"
    plain = Eagle3LabError("Something failed. Do this instead.")
    assert (plain.code, plain.headline) == ("BAD_INPUT", "Something failed.")
    up = UncapturablePoints("cannot capture resid[0]", ("[-1] -> x",), "Choose other points.")
    assert (up.code, up.headline, str(up)) == ("UNCAPTURABLE_POINTS", "cannot capture resid[0]",
                                                "cannot capture resid[0]. Choose other points.")
    back = pickle.loads(pickle.dumps(up))
    assert (type(back), back.code, back.headline, back.tried, str(back)) == (
        UncapturablePoints, up.code, up.headline, up.tried, str(up))
