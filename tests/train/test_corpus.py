"""Corpus extraction, split, prompts, tokenizer and draft vocabulary (fast, no model training)."""

from __future__ import annotations

import json
import lzma

import pytest
import torch

from eagle3lab import bundled
from eagle3lab.bundled import load_prompts, prompt_rows
from eagle3lab.errors import Eagle3LabError
from eagle3lab.train.corpus import (
    Doc,
    collect_stdlib,
    extract,
    is_heldout,
    make_prompts,
    read_corpus,
    split_docs,
)
from eagle3lab.train.draft_vocab import check_draft_vocab, select_draft_vocab, token_counts
from eagle3lab.train.tokenizer import train_tokenizer

CODE = '''"""Module docstring that is long enough to become a prose prompt for the tests, with several words."""


def add(a, b):
    """Add two numbers and return the result of the addition, which is a number as well."""
    total = a + b
    return total


class Box:
    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value
'''


@pytest.fixture()
def fake_stdlib(tmp_path):
    root = tmp_path / "lib"
    for i in range(40):
        (root / f"pkg{i % 4}").mkdir(parents=True, exist_ok=True)
        (root / f"pkg{i % 4}" / f"mod{i}.py").write_text(CODE.replace("add", f"add{i}"))
    (root / "test").mkdir()
    (root / "test" / "test_x.py").write_text("assert True\n")
    (root / "site-packages").mkdir()
    (root / "site-packages" / "other.py").write_text("x = 1\n")
    (root / "LICENSE.txt").write_text("PSF LICENSE AGREEMENT\n")
    return root


def test_collect_skips_tests_and_site_packages_and_sorts(fake_stdlib):
    docs = collect_stdlib(fake_stdlib)
    paths = [d.path for d in docs]
    assert len(docs) == 40 and paths == sorted(paths)
    assert not any(p.startswith(("test/", "site-packages/")) for p in paths)


def test_split_is_by_path_hash_and_stable(fake_stdlib):
    docs = collect_stdlib(fake_stdlib)
    a = split_docs(docs, heldout_per_mille=300)
    b = split_docs(list(reversed(docs)), heldout_per_mille=300)
    assert {d.path for d in a["heldout"]} == {d.path for d in b["heldout"]}
    assert 0 < len(a["heldout"]) < len(docs)
    assert all(is_heldout(d.path, 300) for d in a["heldout"])


def test_extract_round_trip_and_prompts_from_heldout_only(fake_stdlib, tmp_path):
    out = tmp_path / "data"
    summary = extract(out, fake_stdlib, heldout_per_mille=300)
    train, held = read_corpus(out / "corpus", "train"), read_corpus(out / "corpus", "heldout")
    assert summary["train"]["files"] == len(train) and summary["heldout"]["files"] == len(held)
    assert {d.path for d in train}.isdisjoint({d.path for d in held})
    assert (out / "corpus" / "PSF-LICENSE.txt").read_text().startswith("PSF")
    prompts = prompt_rows(out / "prompts")
    assert prompts and {p["kind"] for p in prompts} == {"code", "prose"}
    assert {p["source"] for p in prompts} <= {d.path for d in held}
    # Same input -> same bytes (xz preset is fixed).
    first = (out / "corpus" / "train.jsonl.xz").read_bytes()
    extract(out, fake_stdlib, heldout_per_mille=300)
    assert (out / "corpus" / "train.jsonl.xz").read_bytes() == first


def test_read_corpus_errors_name_file_and_line(tmp_path):
    with pytest.raises(Eagle3LabError, match="heldout.jsonl.xz"):
        read_corpus(tmp_path, "heldout")
    (tmp_path / "train.jsonl.xz").write_bytes(lzma.compress(b'{"path": "a.py", "text": "x"}\n{"oops": 1}\n'))
    with pytest.raises(Eagle3LabError, match="line 2"):
        read_corpus(tmp_path, "train")
    with pytest.raises(Eagle3LabError, match="split"):
        read_corpus(tmp_path, "validation")


def test_make_prompts_covers_code_and_prose_short_and_long():
    long_doc = '"""' + "word " * 200 + '"""\n' + CODE + "\n".join(f"def f{i}(x):\n    return x + {i}\n" * 3
                                                                 for i in range(40))
    prompts = make_prompts([Doc("m.py", long_doc)], per_group=2)
    groups = {(p["kind"], p["length"]) for p in prompts}
    assert groups == {("code", "short"), ("code", "long"), ("prose", "short"), ("prose", "long")}
    assert all(p["text"] in long_doc or p["kind"] == "prose" for p in prompts)


def test_tokenizer_is_deterministic_and_round_trips():
    docs = [Doc(f"m{i}.py", CODE.replace("add", f"add{i}")) for i in range(30)]
    a, b = train_tokenizer(docs, vocab_size=400), train_tokenizer(docs, vocab_size=400)
    assert a.backend_tokenizer.to_str() == b.backend_tokenizer.to_str()
    assert 300 < len(a) <= 400
    text = CODE + "ünïcode ✓\n"
    assert a.decode(a(text)["input_ids"]) == text
    assert a.eos_token == a.bos_token == "<|endoftext|>"


def test_draft_vocab_most_frequent_as_offsets():
    counts = token_counts([[5, 5, 5, 2, 2, 9, 9, 9, 9, 1]], vocab_size=12)
    v = select_draft_vocab(counts, 3)
    assert v.draft_ids.tolist() == [2, 5, 9]           # ascending target ids
    assert v.d2t.tolist() == [2, 4, 7]                  # offsets: target id = i + d2t[i]
    assert v.t2d.nonzero().flatten().tolist() == [2, 5, 9]
    assert v.coverage == pytest.approx(0.9)
    check_draft_vocab(v.d2t, v.t2d)
    with pytest.raises(ValueError, match="t2d is False"):     # absolute ids stored where offsets belong
        check_draft_vocab(torch.tensor([2, 5, 9]), v.t2d)
    with pytest.raises(ValueError, match="strictly increasing"):
        check_draft_vocab(torch.tensor([9, 4, -2]), v.t2d)
    with pytest.raises(ValueError, match="draft_vocab_size"):
        select_draft_vocab(counts, 13)


@pytest.mark.usefixtures("bundled_models")
def test_shipped_corpus_and_prompts():
    held = {d.path for d in read_corpus(bundled.CORPUS, "heldout")}
    with lzma.open(bundled.CORPUS / "train.jsonl.xz", "rt") as f:
        train = {json.loads(line)["path"] for line in f}
    assert held and train and held.isdisjoint(train)
    prompts = prompt_rows(bundled.PROMPTS)
    assert {p["source"] for p in prompts} <= held
    assert {(p["kind"], p["length"]) for p in prompts} == {
        ("code", "short"), ("code", "long"), ("prose", "short"), ("prose", "long")}
    assert (bundled.CORPUS / "LICENSE.md").exists() and (bundled.CORPUS / "PSF-LICENSE.txt").exists()


def test_load_prompts_mixes_groups_filters_and_reads_ids(tmp_path):
    texts = load_prompts(n=4)
    rows = {r["text"]: r for r in prompt_rows()}
    assert len(texts) == 4 and {(rows[t]["kind"], rows[t]["length"]) for t in texts} == {
        ("code", "short"), ("code", "long"), ("prose", "short"), ("prose", "long")}
    assert {rows[t]["kind"] for t in load_prompts(kind="prose")} == {"prose"}
    assert {rows[t]["length"] for t in load_prompts(length="long", n=5)} == {"long"}
    assert prompt_rows(bundled.PROMPTS) == prompt_rows()      # a folder means its prompts.jsonl
    f = tmp_path / "p.jsonl"
    f.write_text('{"ids": [1, 2, 3]}\n{"text": "x"}\n')
    assert load_prompts(f) == [[1, 2, 3], "x"]
    f.write_text('{"prompt": "no"}\n')
    with pytest.raises(Eagle3LabError, match="'text'"):
        load_prompts(f)
    f.write_text('{"ids": [1, "x"]}\n')
    with pytest.raises(Eagle3LabError, match=r"p.jsonl:1.*key 'ids'"):
        load_prompts(f)
    f.write_text("")
    with pytest.raises(Eagle3LabError, match="empty file"):
        load_prompts(f)
    f.write_bytes(b'{"text": "\xff"}\n')
    with pytest.raises(Eagle3LabError, match="UTF-8"):
        load_prompts(f)
    f.write_text('{"text": "x", "kind": "code"}\n')
    with pytest.raises(Eagle3LabError, match="kind='prose'.*none of 1 rows"):
        load_prompts(f, kind="prose")
    with pytest.raises(Eagle3LabError, match="positive"):
        load_prompts(f, n=0)
