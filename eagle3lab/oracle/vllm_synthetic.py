"""vLLM replaying an acceptance profile: ``rejection_sample_method: "synthetic"``, run where vLLM is installed.

Run by path, never imported by eagle3lab (vLLM is imported only inside ``main``)::

    VLLM_PYTHON eagle3lab/oracle/vllm_synthetic.py < request.json > answer.json

request: ``{"jobs": [job, ...]}``, served one after the other in this one process. A job is a ``vllm_serve.py``
job (target, draft, prompts, max_tokens, num_speculative_tokens, dtype, ignore_eos) plus:

    "speculative": {...}        keys added to the speculative config, e.g. {"rejection_sample_method": "synthetic",
                                "synthetic_acceptance_rates": [...]} (eagle3lab's AcceptanceProfile writes them)
    "stand_in_kernel": false    true: on vLLM's CPU build without Triton, whose greedy rejection kernel
                                (vllm/utils/cpu_triton_utils.py _rejection_greedy_sample_kernel_impl, 0.32.0) asserts
                                ``not SYNTHETIC_MODE``, run instead a line-by-line port of vLLM's own Triton kernel
                                (v1/sample/rejection_sampler.py rejection_greedy_sample_kernel, its SYNTHETIC_MODE
                                branch); every other part stays vLLM's (the config's resolution of the rates, their
                                conversion to conditional ones, the uniform draws, the counters)

Each job serves its prompts greedily (temperature 0) after one warm-up request, as ``vllm_serve.py`` does, and
answers with the outputs, the spec-decode counters over that ``generate`` only, the speculative config vLLM
resolved (``synthetic_acceptance_rates`` after ``_resolve_synthetic_acceptance_rates``), whether the stand-in ran,
and on failure ``error`` {type, message, file (relative to the vllm package), function} of the innermost frame.
"""

from __future__ import annotations

import gc
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # vllm_serve.py, beside this file
from vllm_serve import answer_request, counted_between, counters  # noqa: E402

GREEDY_KERNEL = "vllm.v1.sample.rejection_sampler.rejection_greedy_sample_kernel"


def synthetic_greedy_kernel(output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids,
                            is_greedy, max_spec_len, uniform_probs=None, synthetic_conditional_rates=None,
                            SYNTHETIC_MODE=False):  # noqa: N803 (the kernel's own parameter name)
    """vLLM's ``rejection_greedy_sample_kernel`` (0.32.0) in PyTorch, one request after another; without
    SYNTHETIC_MODE it hands over to the CPU build's own C++ kernel."""
    from vllm.utils import cpu_triton_utils

    if not SYNTHETIC_MODE:
        return cpu_triton_utils._rejection_greedy_sample_kernel_impl(
            output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids, is_greedy,
            max_spec_len)
    start, bonus = 0, bonus_token_ids.reshape(-1)
    for req in range(output_token_ids.shape[0]):
        end = int(cu_num_draft_tokens[req])
        if is_greedy is None or bool(is_greedy[req]):
            rejected = False
            for pos in range(end - start):
                draft = int(draft_token_ids[start + pos])
                accepted = float(uniform_probs[start + pos]) < float(synthetic_conditional_rates[pos]) and draft >= 0
                output_token_ids[req, pos] = draft if accepted else int(target_argmax[start + pos])
                if not accepted:
                    rejected = True
                    break
            if not rejected:
                output_token_ids[req, end - start] = int(bonus[req])
        start = end


def install_stand_in() -> None:
    """After the CPU platform registers its kernels (at worker start), register the port over the greedy one."""
    from vllm.platforms import current_platform
    from vllm.triton_utils.dispatcher import register_kernels

    platform = type(current_platform)
    original = platform.register_triton_kernel_overrides

    def register():
        original()
        register_kernels({GREEDY_KERNEL: synthetic_greedy_kernel})
    platform.register_triton_kernel_overrides = staticmethod(register)


def _error(err: BaseException) -> dict:
    import vllm

    frame = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
    root = Path(vllm.__file__).resolve().parent
    file = None
    if frame is not None:
        path = Path(frame.filename).resolve()
        file = str(path.relative_to(root.parent)) if root in path.parents else path.name
    return {"type": type(err).__name__, "message": str(err), "file": file,
            "function": frame.name if frame is not None else None}


def serve_job(job: dict) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    out = {"name": job.get("name"), "outputs": None, "counters": None, "resolved": None, "error": None}
    llm = None
    try:
        spec = {"method": "eagle3", "model": job["draft"], "num_speculative_tokens": int(job["num_speculative_tokens"]),
                **(job.get("speculative") or {})}
        llm = LLM(model=job["target"], dtype=job.get("dtype", "float32"), max_model_len=1024, enforce_eager=True,
                  seed=0, disable_log_stats=False, speculative_config=spec)
        resolved = llm.llm_engine.vllm_config.speculative_config
        out["resolved"] = {"rejection_sample_method": resolved.rejection_sample_method,
                           "synthetic_acceptance_rates": resolved.synthetic_acceptance_rates}
        warm = [TokensPrompt(prompt_token_ids=[1, 2, 3, 4, 5, 6, 7, 8])]
        llm.generate(warm, SamplingParams(temperature=0.0, max_tokens=8), use_tqdm=False)
        params = SamplingParams(temperature=0.0, max_tokens=int(job.get("max_tokens", 64)),
                                ignore_eos=bool(job.get("ignore_eos", True)))
        before = counters(llm)
        results = llm.generate([TokensPrompt(prompt_token_ids=[int(t) for t in p]) for p in job["prompts"]], params,
                               use_tqdm=False)
        out["counters"] = counted_between(before, counters(llm))
        out["outputs"] = [list(r.outputs[0].token_ids) for r in results]
    except Exception as err:
        out["error"] = _error(err)
    finally:
        del llm
        gc.collect()
    return out


def _head() -> dict:
    from vllm.triton_utils import HAS_TRITON

    return {"has_triton": bool(HAS_TRITON)}


def _serve(job: dict) -> dict:
    """One job, on the port of the greedy kernel where it asks for it and vLLM's build has no Triton."""
    from vllm.triton_utils import HAS_TRITON

    stand_in = bool(job.get("stand_in_kernel")) and not HAS_TRITON
    if stand_in:
        install_stand_in()
    return {**serve_job(job), "stand_in_kernel": stand_in}


def main() -> int:
    return answer_request(_head, _serve)


if __name__ == "__main__":
    sys.exit(main())
