"""Sessions: recorded, loaded without the models in a fresh process, compared, re-run; never code."""

from __future__ import annotations

import json
import subprocess
import sys

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from eagle3lab import bundled
from eagle3lab.app.cli import main
from eagle3lab.app.rerun import rerun
from eagle3lab.app.session import Session, diff_sessions
from eagle3lab.engines.acceptance import Interval
from eagle3lab.errors import Eagle3LabError

LAUNCH = ("python -m sglang.launch_server --model-path T --speculative-algorithm EAGLE3 --speculative-draft-model-path D "
          "--speculative-eagle-topk 1 --max-running-requests 8 ")


def test_a_session_loads_in_a_fresh_process_without_models(tmp_path):
    s = Session("demo", command={"kind": "doctor", "argv": ["doctor", "--draft", "D"]}, parameters={"n": 3})
    s.model("target", bundled.TARGET)
    s.metric("tau", Interval(2.5, 2.25, 2.75, 0.95, 8))
    s.metric("count", 7)
    s.table("t", pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}))
    fig, ax = plt.subplots()
    ax.plot([1, 2])
    s.figure("f", fig)
    plt.close(fig)
    s.save(tmp_path / "s")
    code = ("import json, sys; from eagle3lab.app.session import Session; s = Session.load(sys.argv[1]); "
            "print(json.dumps({'m': s.metrics, 't': s.tables['t'].to_dict('list'), 'png': s.figures['f'][:4].hex(), "
            "'torch': 'torch' in sys.modules}))")
    out = json.loads(subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True,
                                    check=True).stdout)
    assert out["m"]["tau"] == {"value": 2.5, "low": 2.25, "high": 2.75, "level": 0.95, "units": 8}
    assert out["m"]["count"] == {"value": 7}
    assert out["t"] == {"a": [1, 2], "b": ["x", "y"]} and out["png"] == "89504e47"
    assert out["torch"] is False, "loading a session needs no models and no torch"


@pytest.mark.parametrize("bad", ["model.pkl", "tables/evil.py", "x.bin"])
def test_a_session_holding_code_or_a_pickle_is_refused(tmp_path, bad):
    s = Session("demo", env={"python": "3"})
    s.save(tmp_path / "s")
    target = tmp_path / "s" / bad
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"\x80\x04")
    with pytest.raises(Eagle3LabError, match=bad.split("/")[-1]):
        Session.load(tmp_path / "s")


def doctor_session(path, steps, capsys):
    argv = ["doctor", "--draft", str(bundled.DRAFT_HEALTHY), "--target", str(bundled.TARGET), "--num-prompts", "4",
            "--max-new-tokens", "24", "--engine-args", LAUNCH + f"--speculative-num-steps {steps} "
            f"--speculative-num-draft-tokens {steps + 1}", "--session", str(path), "--json"]
    assert main(argv) == 0
    capsys.readouterr()
    return Session.load(path)


@pytest.mark.timeout(600)
def test_diff_names_the_changed_flags_and_metrics_and_a_rerun_reproduces(bundled_models, tmp_path, capsys):
    a = doctor_session(tmp_path / "a", 3, capsys)
    b = doctor_session(tmp_path / "b", 1, capsys)
    diff = diff_sessions(a, b)
    flags = diff[diff.kind == "command"]
    assert set(flags.name) == {"argv.engine-args --speculative-num-steps", "argv.engine-args --speculative-num-draft-tokens"}
    assert set(diff.kind) == {"command", "metric"}, diff          # same models, parameters, machine
    metrics = diff[diff.kind == "metric"]
    assert {"tau: as launched (chain 3)", "tau: as launched (chain 1)"} <= set(metrics.name)
    assert set(metrics.change) <= {"added", "removed"}             # a different chain is a different metric
    # the CLI prints the same table
    assert main(["session", "diff", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["differences"]
    assert len(printed) == len(diff)
    # re-run on the same models: the very same numbers (CPU)
    again = rerun(a)
    same = diff_sessions(a, again)
    assert same.empty, same
    assert main(["session", "show", str(tmp_path / "a")]) == 0 and "sha256" in capsys.readouterr().out


def test_metric_differences_beyond_and_within_noise():
    a, b = Session("x"), Session("y")
    a.metric("tau", Interval(2.0, 1.9, 2.1, 0.95, 8))
    b.metric("tau", Interval(2.6, 2.4, 2.8, 0.95, 8))
    a.metric("ce", Interval(4.0, 3.5, 4.5, 0.95, 8))
    b.metric("ce", Interval(4.2, 3.7, 4.7, 0.95, 8))
    a.metric("n", 3)
    b.metric("n", 4)
    diff = diff_sessions(a, b).set_index("name")
    assert diff.loc["tau", "change"] == "beyond noise" and diff.loc["ce", "change"] == "within noise"
    assert diff.loc["n", "change"] == "changed" and len(diff) == 3


def test_a_tau_and_a_speedup_round_trip_with_their_intervals(tmp_path):
    s = Session("demo", env={"python": "3"})
    tau, speedup = Interval(2.5, 2.25, 2.75, 0.95, 16), Interval(1.21, 1.08, 1.33, 0.9, 24)
    s.metric("tau: as launched", tau, unit="tokens per round")
    s.metric("decode speedup", speedup, unit="x no speculation")
    s.metric("count", 7)
    s.save(tmp_path / "s")
    back = Session.load(tmp_path / "s")
    assert back.interval("tau: as launched") == tau and back.interval("decode speedup") == speedup
    assert back.metrics["decode speedup"] == {"value": 1.21, "low": 1.08, "high": 1.33, "level": 0.9, "units": 24,
                                              "unit": "x no speculation"}
    assert back.metrics["tau: as launched"]["unit"] == "tokens per round"
    assert back.interval("count") is None and back.metrics["count"] == {"value": 7}
    assert json.loads((tmp_path / "s" / "session.json").read_text())["format"] == "eagle3lab-session/2"


def test_a_version_1_session_still_loads_and_a_future_one_is_refused(tmp_path):
    """/1 stored value, low, high and level, no units: its intervals read back with units None."""
    folder = tmp_path / "old"
    folder.mkdir()
    record = {"format": "eagle3lab-session/1", "name": "old", "command": {}, "parameters": {}, "models": {},
              "environment": {}, "notes": [], "failure": None, "tables": [], "figures": [], "tensors": [],
              "metrics": {"tau": {"value": 2.0, "low": 1.9, "high": 2.1, "level": 0.95}, "n": {"value": 3}}}
    (folder / "session.json").write_text(json.dumps(record))
    old = Session.load(folder)
    assert old.interval("tau") == Interval(2.0, 1.9, 2.1, 0.95, None) and old.interval("n") is None
    new = Session("new")
    new.metric("tau", Interval(2.6, 2.4, 2.8, 0.95, 8))
    new.metric("n", 3)
    diff = diff_sessions(old, new).set_index("name")
    assert diff.loc["tau", "change"] == "beyond noise" and "n" not in diff.index
    (folder / "session.json").write_text(json.dumps({**record, "format": "eagle3lab-session/99"}))
    with pytest.raises(Eagle3LabError, match="eagle3lab-session/99"):
        Session.load(folder)


def executed(claims: dict):
    """An executed notebook whose summary() output carries ``claims`` (as the workbook finds them)."""
    import nbformat

    from eagle3lab.app.session import plain_json
    from eagle3lab.app.workbook import CLAIMS_KEY, SUMMARY_KEY

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("summary(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": "**Summary.** x"},
                                           metadata={SUMMARY_KEY: "x", CLAIMS_KEY: plain_json(claims)})]
    nb.cells.append(cell)
    return nbformat.reads(nbformat.writes(nb), as_version=4)      # through JSON, as a saved notebook is


def test_a_notebook_session_stores_each_claimed_interval_whole_with_its_level_and_unit(tmp_path):
    from eagle3lab.analysis.verdicts import Measured, compare
    from eagle3lab.app.workbook import notebook_session

    verdicts = compare({"a": Measured((10, 12, 9, 11), (5, 5, 5, 5)), "b": Measured((14, 16, 13, 15), (5, 5, 5, 5))}, "a")
    claims = {"tau": 2.5, "tau_low": 2.2, "tau_high": 2.8, "tau_level": 0.95, "tau_units": 8, "tau_unit": "tokens per round",
              "speed": {"main": {"value": 1.2, "low": 1.1, "high": 1.3, "level": 0.9, "units": 12,
                                 "unit": "x no speculation", "word": "faster"}},
              "ratio": Interval(0.8, 0.7, 0.9, 0.95, 24),     # an Interval handed to summary() as it is
              "pair": verdicts.claims(), "count": 7, "word": "beats", "flag": True, "orphan_low": 1.5}
    s = notebook_session(executed(claims), "09_demo.ipynb", {})
    s.save(tmp_path / "s")
    m = Session.load(tmp_path / "s").metrics
    assert m["tau"] == {"value": 2.5, "low": 2.2, "high": 2.8, "level": 0.95, "units": 8, "unit": "tokens per round"}
    assert m["speed.main"] == {"value": 1.2, "low": 1.1, "high": 1.3, "level": 0.9, "units": 12, "unit": "x no speculation"}
    assert m["ratio"] == {"value": 0.8, "low": 0.7, "high": 0.9, "level": 0.95, "units": 24}
    # a verdict's claims: its value and its paired difference, each one interval with the level, prompts and unit
    b, diff = verdicts["b"], verdicts["b"].diff
    said = {"level": 0.95, "units": b.value.units, "unit": "tokens per round"}
    assert m["pair.b"] == {"value": b.value.value, "low": b.value.low, "high": b.value.high, **said}
    assert m["pair.b.diff"] == {"value": diff.value, "low": diff.low, "high": diff.high, **said}
    assert m["pair.a"] == {"value": verdicts["a"].value.value, "low": verdicts["a"].value.low,
                           "high": verdicts["a"].value.high, **said}
    assert "pair.b.value" not in m and "pair.b.low" not in m and "tau_low" not in m and "tau_level" not in m
    assert m["count"] == {"value": 7} and m["orphan_low"] == {"value": 1.5} and not {"word", "flag"} & set(m)
    assert Session.load(tmp_path / "s").interval("ratio") == Interval(0.8, 0.7, 0.9, 0.95, 24)


def test_an_old_notebook_session_still_loads_its_bare_triples_read_as_one_interval(tmp_path):
    """Format /2 as notebook sessions were written before: no level, units or unit, a claim object's interval as
    three bare numbers. It loads; each triple reads as one interval, comparable with a newer session's."""
    folder = tmp_path / "old"
    folder.mkdir()
    record = {"format": "eagle3lab-session/2", "name": "05", "command": {"kind": "notebook"}, "parameters": {},
              "models": {}, "environment": {}, "notes": [""], "failure": None, "tables": [], "figures": [], "tensors": [],
              "metrics": {"tau": {"value": 2.0, "low": 1.9, "high": 2.1}, "c": {"value": 0.1},
                          "chain_tau.chain 2.value": {"value": 2.3}, "chain_tau.chain 2.low": {"value": 2.2},
                          "chain_tau.chain 2.high": {"value": 2.5}, "chain_tau.chain 2.by": {"value": 0.4},
                          "lone.value": {"value": 1.0}}}
    (folder / "session.json").write_text(json.dumps(record))
    old = Session.load(folder)
    assert list(old.metrics) == ["tau", "c", "chain_tau.chain 2", "chain_tau.chain 2.by", "lone.value"]
    assert old.interval("chain_tau.chain 2") == Interval(2.3, 2.2, 2.5, None, None)
    assert old.interval("tau") == Interval(2.0, 1.9, 2.1, None, None) and old.interval("c") is None
    new = Session("05")
    new.metric("tau", Interval(2.05, 1.95, 2.15, 0.95, 8), unit="tokens per round")
    new.metric("chain_tau.chain 2", Interval(3.0, 2.8, 3.2, 0.95, 8), unit="tokens per round")
    diff = diff_sessions(old, new).set_index("name")
    assert diff.loc["tau", "change"] == "within noise" and diff.loc["chain_tau.chain 2", "change"] == "beyond noise"


def test_the_device_and_dtype_used_are_recorded_and_compared(tmp_path):
    """A command records them; a notebook session resolves its DEVICE / DTYPE parameters ("auto" by
    models.device's rule on this machine); a session written before them reads as {}; diff names a change."""
    import torch

    from eagle3lab.app.session import runs_on_from

    a = Session("a", runs_on={"device": "cpu", "dtype": "bfloat16"})
    a.save(tmp_path / "a")
    assert Session.load(tmp_path / "a").runs_on == {"device": "cpu", "dtype": "bfloat16"}
    auto = "bfloat16" if torch.cuda.is_available() else "float32"
    assert runs_on_from({"DEVICE": "cpu", "DTYPE": "float16"}) == {"device": "cpu", "dtype": "float16"}
    assert runs_on_from({"DEVICE": "cpu", "DTYPE": "auto"}) == {"device": "cpu", "dtype": "float32"}
    assert runs_on_from({"DTYPE": "auto"})["dtype"] == auto and runs_on_from({"TARGET": "x"}) == {}
    assert runs_on_from({"DEVICE": "cpu", "DTYPE": "float8"}) == {}       # a run that failed on it: no guess
    nb = Session("nb", parameters={"DEVICE": "cpu", "DTYPE": "auto"})
    nb.save(tmp_path / "nb")
    assert Session.load(tmp_path / "nb").runs_on == {"device": "cpu", "dtype": "float32"}
    record = json.loads((tmp_path / "a" / "session.json").read_text())
    del record["runs_on"]
    (tmp_path / "a" / "session.json").write_text(json.dumps(record))
    old = Session.load(tmp_path / "a")
    assert old.runs_on == {}
    diff = diff_sessions(Session.load(tmp_path / "nb"), Session("b", runs_on={"device": "cpu", "dtype": "bfloat16"}))
    row = diff[(diff.kind == "runs on") & (diff.name == "dtype")]
    assert list(row.a) == ["float32"] and list(row.b) == ["bfloat16"]
