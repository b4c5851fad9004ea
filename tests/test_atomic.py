"""Writes appear whole or not at all, and are readable by others."""

from __future__ import annotations

import stat

import pytest

from eagle3lab.atomic import atomic_dir, atomic_file, write_json, write_text


def test_a_failed_write_leaves_the_old_file_and_no_debris(tmp_path):
    target = tmp_path / "card.md"
    write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_file(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card.md"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_folder_is_replaced_whole_and_published_readable(tmp_path):
    out = tmp_path / "model"
    with atomic_dir(out) as tmp:
        write_json(tmp / "config.json", {"a": 1})
        (tmp / "sub").mkdir()
    with pytest.raises(ValueError), atomic_dir(out) as tmp:
        (tmp / "config.json").write_text("{broken")
        raise ValueError("bad weights")
    assert (out / "config.json").read_text() == '{\n "a": 1\n}\n'
    assert stat.S_IMODE(out.stat().st_mode) == 0o755 and stat.S_IMODE((out / "sub").stat().st_mode) == 0o755
    with atomic_dir(out) as tmp:
        (tmp / "weights").write_bytes(b"x")
    assert sorted(p.name for p in out.iterdir()) == ["weights"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
