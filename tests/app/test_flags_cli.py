"""`eagle3lab flags`: the documented --json object, exit codes, and the text table."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from eagle3lab import bundled
from eagle3lab.app.cli import main
from eagle3lab.engines.flags import SEED_COMMAND, SEED_DRAFT_CONFIG, SEED_TARGET_CONFIG

DOC = bundled.ROOT / "docs" / "cli" / "flags.md"
SEED = SEED_COMMAND.split()


def run(capsys, *argv):
    rc = main(["flags", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_seed_json_is_the_documented_object(capsys, tmp_path):
    (tmp_path / "target.json").write_text(json.dumps(SEED_TARGET_CONFIG))
    (tmp_path / "draft.json").write_text(json.dumps(SEED_DRAFT_CONFIG))
    rc, out, _ = run(capsys, "sglang", "--json", "--engine-version", "0.5.11", "--target-config",
                     str(tmp_path / "target.json"), "--draft-config", str(tmp_path / "draft.json"), "--", *SEED)
    assert rc == 0
    res = json.loads(out)
    assert res["max_accept_length"] == 2 and res["effective"]["num_draft_tokens"] == 2
    assert res["as_given"]["num_draft_tokens"] == 16 and res["effective"]["aux_resid"] == [3, 31, 59]
    assert "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED" in [f["code"] for f in res["findings"]]
    doc = DOC.read_text()
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", doc, flags=re.M))
    assert set(res) <= documented
    assert set(res["findings"][0]) <= documented
    for key in res["effective"]:
        assert f"`{key}`" in doc, key


def test_text_table_and_target_arch(capsys):
    rc, out, _ = run(capsys, "sglang", "--target-arch", "DeepseekV3ForCausalLM", "--num-layers", "61", "--", *SEED)
    assert rc == 0
    assert re.search(r"^num_draft_tokens\s+16\s+2\s+<- SGL_TOPK1_DRAFT_TOKENS_ADJUSTED", out, flags=re.M)
    assert "max accept length per verify step: 2" in out
    assert "fix: For a 16-token chain pass --speculative-num-steps 15 --speculative-eagle-topk 1" in out


def test_error_findings_exit_1_and_bad_input_exits_2(capsys):
    rc, out, _ = run(capsys, "sglang", "--json", "--target-arch", "LlamaForCausalLM", "--",
                     "python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
                     "--speculative-draft-model-path", "d", "--speculative-eagle-topk", "4")
    assert rc == 1 and json.loads(out)["counts"]["error"] >= 1
    rc, _, err = run(capsys, "vllm", "--", "vllm serve m --speculative-config '{\"method\": eagle3}'")
    assert rc == 2 and "malformed JSON" in err
    rc, _, err = run(capsys, "trtllm", "--", *SEED)
    assert rc == 2 and "expected one of sglang, vllm" in err
    rc, _, err = run(capsys, "sglang", "--engine-version", "new", "--", *SEED)
    assert rc == 2 and "'new'" in err
    assert "eagle3lab flags: error: --engine-version: expected" in err  # named as typed, not engine_version
    rc, _, err = run(capsys, "sglang", "--num-layers", "0", "--", *SEED)
    assert rc == 2 and "`--num-layers 0`: expected an integer >= 1" in err
    rc, _, err = run(capsys, "sglang")
    assert rc == 2 and "no launch command" in err


def test_command_from_a_file(capsys, tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n  --speculative-config "
                    "'{\"method\": \"eagle3\", \"model\": \"d\", \"num_speculative_tokens\": 4}'\n")
    rc, out, _ = run(capsys, "vllm", "--json", "--file", str(path))
    assert rc == 0 and json.loads(out)["max_accept_length"] == 5


def test_console_script_without_torch_import():
    code = ("import sys; from eagle3lab.app.cli import main; rc = main(['flags', 'sglang', '--json', '--', "
            "'--speculative-algorithm', 'EAGLE3', '--speculative-draft-model-path', 'd', "
            "'--speculative-num-steps', '2', '--speculative-eagle-topk', '1']); "
            "assert 'torch' not in sys.modules; sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["max_accept_length"] == 3


def test_engine_platform_cpu_triton_runs_v2_which_ignores_eagle_config_ids(capsys, tmp_path):
    """--engine-platform cpu+triton (vLLM's CPU image with triton-cpu): 0.32.0 runs V2, which reads only the top-level
    ids, so eagle_config's [1, 5, 8] are ignored and the default captured; the PyPI CPU wheel (cpu) runs V1 and reads
    them. Bad input: a platform for SGLang, or one not in vllm_runner.PLATFORMS, exits 2 naming the flag."""
    (tmp_path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1, "hidden_size": 64,
        "draft_vocab_size": 100, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 8]}}))
    spec = json.dumps({"method": "eagle3", "model": str(tmp_path), "num_speculative_tokens": 3})
    runs = {}
    for platform in ("cpu", "cpu+triton"):
        rc, out, _ = run(capsys, "vllm", "--json", "--engine-version", "0.32.0", "--engine-platform", platform,
                         "--num-layers", "12", "--target-arch", "LlamaForCausalLM", "--",
                         f"vllm serve T --speculative-config '{spec}'")
        assert rc == 0
        runs[platform] = json.loads(out)["effective"]
    assert (runs["cpu"]["model_runner"], runs["cpu"]["aux_resid"]) == ("V1", [1, 5, 8])
    assert (runs["cpu+triton"]["model_runner"], runs["cpu+triton"]["aux_resid"]) == ("V2", [2, 6, 9])
    rc, _, err = run(capsys, "sglang", "--engine-platform", "cpu+triton", "--", *SEED)
    assert rc == 2 and "--engine-platform: expected engine vllm" in err and "found sglang" in err
    try:
        run(capsys, "vllm", "--engine-platform", "rocm", "--", "vllm serve T")
    except SystemExit as exc:
        assert exc.code == 2
    assert "invalid choice: 'rocm'" in capsys.readouterr().err


def test_draft_window_from_the_launch_lines_draft(capsys, tmp_path):
    """A speculators draft trained with a 2048-token window on layer 0, launched on SGLang without the window flag:
    DRAFT_WINDOW with the flag as the fix; with it, no finding."""
    (tmp_path / "config.json").write_text(json.dumps({
        "speculators_model_type": "eagle3", "architectures": ["Eagle3Speculator"], "draft_vocab_size": 100,
        "speculators_config": {"verifier": {"architectures": ["LlamaForCausalLM"]}},
        "transformer_layer_config": {"num_hidden_layers": 1, "hidden_size": 64, "sliding_window": 2048,
                                     "layer_types": ["sliding_attention"]}}))
    launch = ["python", "-m", "sglang.launch_server", "--model-path", "T", "--speculative-algorithm", "EAGLE3",
              "--speculative-draft-model-path", str(tmp_path)]
    _, out, _ = run(capsys, "sglang", "--json", "--", *launch)
    found = [f for f in json.loads(out)["findings"] if f["code"] == "DRAFT_WINDOW"]
    assert len(found) == 1 and found[0]["fix"] == "Launch with --speculative-draft-window-size 2048."
    _, out, _ = run(capsys, "sglang", "--json", "--", *launch, "--speculative-draft-window-size", "2048")
    assert "DRAFT_WINDOW" not in [f["code"] for f in json.loads(out)["findings"]]
