"""d2t/t2d invariants, including absolute ids stored where offsets belong."""

from __future__ import annotations

import torch

from eagle3lab.findings import Severity
from eagle3lab.models.vocab import build_vocab_map, check_vocab_map

VOCAB, DRAFT = 100, 10
IDS = torch.tensor([3, 7, 8, 20, 21, 40, 55, 60, 90, 99])


def severities(findings):
    return [(f.severity, f.where) for f in findings]


def test_a_valid_map_has_no_findings_and_maps_ids():
    d2t, t2d = build_vocab_map(IDS, VOCAB)
    assert check_vocab_map(d2t, t2d, VOCAB, DRAFT) == []
    assert (torch.arange(DRAFT) + d2t).tolist() == IDS.tolist() and int(t2d.sum()) == DRAFT


def test_absolute_ids_stored_where_offsets_belong_are_recognised():
    _, t2d = build_vocab_map(IDS, VOCAB)
    findings = check_vocab_map(IDS.clone(), t2d, VOCAB, DRAFT)   # absolute ids, not offsets
    assert findings[0].severity == Severity.ERROR
    assert "ABSOLUTE target ids" in findings[0].text and "d2t - arange" in findings[0].text


def test_out_of_range_offsets():
    d2t, t2d = build_vocab_map(IDS, VOCAB)
    d2t[-1] += 5
    f = check_vocab_map(d2t, t2d, VOCAB, DRAFT)
    assert severities(f) == [(Severity.ERROR, "d2t")] and "outside [0, 100)" in f[0].text


def test_t2d_with_the_wrong_count_and_a_disagreeing_t2d():
    d2t, t2d = build_vocab_map(IDS, VOCAB)
    t2d[0] = True
    assert (Severity.ERROR, "t2d") in severities(check_vocab_map(d2t, t2d, VOCAB, DRAFT))
    t2d[0], t2d[3], t2d[4] = False, False, True    # same count, but id 3 no longer marked
    f = check_vocab_map(d2t, t2d, VOCAB, DRAFT)
    assert severities(f) == [(Severity.ERROR, "d2t/t2d")] and "1 draft ids" in f[0].text


def test_not_increasing_wrong_shape_wrong_dtype_and_missing():
    d2t, t2d = build_vocab_map(IDS, VOCAB)
    swapped = d2t.clone()
    swapped[[2, 3]] = swapped[[3, 2]]
    assert "strictly increasing" in check_vocab_map(swapped, None, VOCAB, DRAFT)[0].text
    assert "shape [10]" in check_vocab_map(d2t[:5], t2d, VOCAB, DRAFT)[0].text
    assert "integer" in check_vocab_map(d2t.float(), t2d, VOCAB, DRAFT)[0].text
    assert "first 10 target ids" in check_vocab_map(None, None, VOCAB, DRAFT)[0].text
    assert severities(check_vocab_map(None, None, VOCAB, VOCAB)) == [(Severity.INFO, "d2t/t2d")]
    # each finding carries a code callers match instead of the message
    codes = [check_vocab_map(*args, VOCAB, size)[0].code for args, size in (
        ((swapped, None), DRAFT), ((d2t[:5], t2d), DRAFT), ((d2t.float(), t2d), DRAFT), ((None, None), DRAFT),
        ((None, None), VOCAB))]
    assert codes == ["VOCAB_D2T_NOT_INCREASING", "VOCAB_D2T_SHAPE", "VOCAB_D2T_DTYPE", "VOCAB_D2T_MISSING",
                     "VOCAB_MAP_NOT_NEEDED"]


def test_all_zero_offsets_are_flagged_as_suspicious():
    d2t, t2d = build_vocab_map(torch.arange(DRAFT), VOCAB)
    assert severities(check_vocab_map(d2t, t2d, VOCAB, DRAFT)) == [(Severity.WARNING, "d2t")]
