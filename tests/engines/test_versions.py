"""One placement of an engine build relative to a change, shared by `eagle3lab flags` and the layer-id translator."""

import json
import re
from datetime import date, timedelta

import pytest

from eagle3lab import bundled
from eagle3lab.engines import layer_ids
from eagle3lab.engines.flags import SEED_COMMAND, SEED_DRAFT_CONFIG, SEED_TARGET_CONFIG, resolve_flags
from eagle3lab.engines.flags import sglang as flags_sglang
from eagle3lab.engines.flags import vllm as flags_vllm
from eagle3lab.engines.layer_ids import CHANGES, resolve_aux_layers
from eagle3lab.engines.versions import Change, parse_engine_version, place, place_in_order, rule_at
from eagle3lab.errors import Eagle3LabError

ROOT = bundled.ROOT

KIMI = "DeepseekV3ForCausalLM"
PR = CHANGES["sglang#25454"]  # merged 2026-05-18; releases <= 0.5.12 lack it

CASES = [
    ("2026-05-17", "before"), ("2026-05-18", "after"),       # by the merge date
    ("pre-#25454", "before"), ("post-25454", "after"),       # by a mark for this PR
    ("pre-#25464", "uncertain"), ("post-#46973", "uncertain"),  # a mark for another PR says nothing
    ("0.5.4", "before"), ("0.5.12", "before"),               # a release within the known bound
    ("0.5.12.post1", "uncertain"),                           # a release no bound covers
    (None, "after"), ("latest", "after"),                    # the newest code read
]


@pytest.mark.parametrize("version,state", CASES)
def test_placement(version, state):
    where = place(PR, version)
    assert where.state == state
    assert where.after is (state != "before")  # an uncertain build behaves as the newest code
    if state != "uncertain":
        assert where.warning is None
        return
    for part in ("SGLang PR #25454", "merged 2026-05-18", "assumed the newest code", "YYYY-MM-DD",
                 "'pre-#25454' / 'post-#25454'", "a release <= 0.5.12 (lacks it)"):
        assert part in where.warning, part


@pytest.mark.parametrize("version,state", CASES)
def test_flags_and_layer_ids_place_a_build_the_same_way(version, state):
    assert flags_sglang.CHANGES["deepseek-ids"] is PR  # one record for both paths
    expected = [3, 31, 59] if state == "before" else [2, 30, 58]
    ids = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version=version)
    flags = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version=version)
    assert list(ids.resid) == flags.effective["aux_resid"] == expected
    said_ids = [n.text for n in ids.notes if n.kind == "version"]
    said_flags = [f.text for f in flags.findings if f.code == "ENGINE_VERSION_UNPLACED" and f.change is PR]
    assert said_ids == said_flags == ([place(PR, version).warning] if state == "uncertain" else [])


@pytest.mark.parametrize("bad", ["banana", "2026-13-40", "0.5.x", "pre-#"])
def test_garbage_version_is_a_clear_error_on_both_paths(bad):
    with pytest.raises(Eagle3LabError, match="engine_version") as err:
        resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version=bad)
    assert repr(bad) in str(err.value) and "YYYY-MM-DD" in str(err.value)
    with pytest.raises(Eagle3LabError, match=r"^engine_version: expected") as err:  # Python: the parameter
        resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version=bad)
    assert repr(bad) in str(err.value) and "--engine-version" not in str(err.value)


def test_a_bad_version_is_named_as_the_caller_wrote_it():
    with pytest.raises(Eagle3LabError) as err:
        place(PR, "banana")  # a Python call: there is no --engine-version flag to name
    assert str(err.value).startswith("engine_version: expected") and "--" not in str(err.value).split(":")[0]
    with pytest.raises(Eagle3LabError, match=r"^release_of_my_build: expected"):
        parse_engine_version("0.5.x", "release_of_my_build")
    with pytest.raises(TypeError):
        parse_engine_version("0.5.4")  # no default name: every caller says what its user typed


def test_parse_engine_version_spellings():
    assert [parse_engine_version(v, "v") for v in (None, "", " latest ", "main", "current")] == [None] * 5
    assert parse_engine_version(" 0.5.4 ", "v") == "0.5.4"
    assert parse_engine_version("Post-#25454", "v") == "Post-#25454"


def test_a_build_from_the_merge_day_has_the_change():
    for change in (PR, flags_sglang.CHANGES["spec-v1-retired"], flags_vllm.CHANGES["aux-from-config"]):
        day_before = (date.fromisoformat(change.merged) - timedelta(days=1)).isoformat()
        assert (place(change, day_before).state, place(change, change.merged).state) == ("before", "after")


def _records():
    """PR number -> its one record, over every module that keeps Change records."""
    out = {}
    for module in (layer_ids, flags_sglang, flags_vllm):
        for change in module.CHANGES.values():
            if change.pr is not None:
                assert out.setdefault(change.pr, change) is change, f"PR #{change.pr} has two records"
    return out


def _texts():
    """What a reader sees: docs, notebook cells, and the translator's rule texts."""
    for path in sorted((ROOT / "docs").rglob("*.md")):
        yield str(path.relative_to(ROOT)), path.read_text()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        yield str(path.relative_to(ROOT)), "\n".join("".join(c["source"]) for c in cells)
    for key, rule in layer_ids._RULES.items():
        yield f"layer_ids._RULES[{key!r}]", rule
    for row in layer_ids.RULES:   # each rule's note as said: filled from its range
        found = rule_at(layer_ids.RULES, None, engine=row.engine, kind=row.kind, key=row.key, newest="0")
        yield f"layer_ids.RULES[{row.kind}, {row.key}, {row.since}]", found.say(row=row, arch=row.key)


MERGED = re.compile(r"#(\d+)\W{0,3}(?:\([^)]*?)?merged\s+(\d{4}-\d{2}-\d{2})")


def test_every_merge_date_written_matches_its_record():
    records, seen = _records(), 0
    for where, text in _texts():
        for m in MERGED.finditer(text):
            change = records.get(int(m.group(1)))
            if change is not None:
                seen += 1
                assert m.group(2) == change.merged, f"{where}: '{m.group(0)}' but the record says {change.merged}"
    assert seen >= 5  # the notebook, the flags docs' era table and the translator's rules are read
    assert MERGED.search("SGLang PR #25454\n(merged 2026-05-16) changed").group(2) == "2026-05-16"


def test_a_change_nothing_places_says_so():
    change = Change("vllm", "draft max_position_embeddings raised")  # no PR, no date, no releases
    for version in ("2026-01-01", "0.8.0", "pre-#15466"):
        where = place(change, version)
        assert where.state == "uncertain" and where.after
        assert "vLLM's change" in where.warning and "merge date unknown" in where.warning
        assert "No release numbers are known" in where.warning
    assert place(change, None).state == "after"


def test_an_open_pr_is_in_no_build_but_its_own_marks_place_it():
    open_pr = CHANGES["vllm#50170"]
    for version in (None, "2026-09-01", "0.20.0", "pre-#46973", "post-#46973"):
        assert place(open_pr, version) == place(open_pr, "pre-#50170")
        assert place(open_pr, version).state == "before"
    assert place(open_pr, "post-#50170").state == "after"
    # The translator follows the same answer: no release warns on the default, no version note.
    res = resolve_aux_layers("vllm", None, 32, engine_version="2026-09-01")
    assert res.codes == ("VLLM_AUX_IDS_DEFAULTED",)   # no version note
    assert "no release read (0.17.0-0.33.0) warns" in res.notes[0].text   # the words say so


def test_release_bounds_on_both_sides():
    change = Change("sglang", "x", 1, "2025-08-22", last_without="0.4.10", first_with="0.5.2")
    assert [place(change, v).state for v in ("0.4.10", "0.5.0", "0.5.2", "0.5.3")] == \
        ["before", "uncertain", "after", "after"]
    assert "a release <= 0.4.10 (lacks it), or a release >= 0.5.2 (has it)" in place(change, "0.5.0").warning


def test_a_change_with_only_date_bounds():
    change = Change("sglang", "x", 7, opened="2025-10-09", on_main_by="2025-10-25")
    assert [place(change, d).state for d in ("2025-10-08", "2025-10-09", "2025-10-24", "2025-10-25")] == \
        ["before", "uncertain", "uncertain", "after"]
    assert change.span() == "PR #7; opened 2025-10-09, on main by 2025-10-25 (merge day not known)"
    warning = place(change, "2025-10-20").warning
    assert "merge date unknown, on main by 2025-10-25" in warning
    assert "YYYY-MM-DD (before 2025-10-09 lacks it; from 2025-10-25 on has it)" in warning


ORDERED = [Change("sglang", f"step {i}", pr, merged, last, first) for i, (pr, merged, last, first) in enumerate(
    [(1, None, "1.0", "1.1"), (2, "2026-02-01", "1.1", "1.2"), (3, "2026-03-01", "1.2", "1.3")])]


@pytest.mark.parametrize("version,era,sure", [
    ("1.0", 0, 0), ("1.1", 1, 1), ("1.3", 3, 3), (None, 3, 3),
    ("2026-02-15", 2, 2),       # #1 has no date, but a build with #2 has #1
    ("2026-01-15", 1, 0),       # lacks #2 and #3; #1 unplaced: era 0 or 1
    ("post-#1", 3, 1),          # has #1; #2 and #3 unplaced: eras 1..3
    ("pre-#3", 2, 0),           # lacks #3; #1 and #2 unplaced: eras 0..2
    ("post-#2", 3, 2), ("pre-#1", 0, 0), ("post-#99", 3, 0),
])
def test_place_in_order_gives_every_era_a_build_may_be_in(version, era, sure):
    assert place_in_order(ORDERED, version) == (era, sure)
    for change in ORDERED[sure:era]:  # the ones it cannot be placed by, each with its own warning
        assert place(change, version).state == "uncertain"


def test_place_in_order_names_the_version_as_the_caller_wrote_it():
    with pytest.raises(Eagle3LabError, match=r"^my_build: expected"):
        place_in_order(ORDERED, "banana", "my_build")


def test_a_rule_says_its_range_from_its_changes():
    """One rule shape, one lookup: a rule's words are a template filled from the range it holds in (its Change and the
    next rule's), so a release boundary is typed once, in the Change."""
    from eagle3lab.engines.versions import Rule

    first = Change("sglang", "a", last_without="1.0", first_with="1.1")
    second = Change("sglang", "b", 9, "2026-02-01", last_without="1.3", first_with="1.4")
    rules = (Rule("sglang", "check", "f.py", None, "none", "nothing up to {until}"),
             Rule("sglang", "check", "f.py", first, "assert", "an assert ({since}-{until})"),
             Rule("sglang", "check", "f.py", second, "error", "an error from {since} (PR #{pr}, merged {merged}); "
                  "read up to {newest}"))
    said = {v: rule_at(rules, v, engine="sglang", kind="check", key="f.py", newest="1.5").say()
            for v in ("1.0", "1.2", "2026-03-01")}
    assert said == {"1.0": "nothing up to 1.0", "1.2": "an assert (1.1-1.3)",
                    "2026-03-01": "an error from 1.4 (PR #9, merged 2026-02-01); read up to 1.5"}
    # a build the first change cannot place may be in either of the first two: the newest possible holds, and the
    # field that changes there gets the one unplaced warning
    found = rule_at(rules, "2026-01-15", engine="sglang", kind="check", key="f.py", newest="1.5")
    warned = []
    assert found.span == (0, 1) and found.get("value", lambda text, change: warned.append(change)) == "assert"
    assert warned == [first] and found.change_to("value", "error") is second
    with pytest.raises(Eagle3LabError, match="rules: expected a sglang check rule for 'g.py'"):
        rule_at(rules, None, engine="sglang", kind="check", key="g.py", newest="1.5")
