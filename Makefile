# eagle3lab: two commands for a newcomer: `make workbook` and `make test`.
# Every target creates .venv on first use from requirements.lock (exact versions).

PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-stamp
export PYTHONHASHSEED := 0
export TOKENIZERS_PARALLELISM := false
# Model hubs are unreachable here; nothing may download weights at run time.
export HF_HUB_OFFLINE := 1

.PHONY: install engines test lint workbook lab data data-real data-smoke lock bench clean

install: $(STAMP)

$(STAMP): requirements.lock requirements-real.lock pyproject.toml scripts/install-system.sh
	bash scripts/install-system.sh
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-real.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(BIN)/python -m eagle3lab.train.real_target
	touch $(STAMP)

# The engines' own code (speculators, SpecForge, SGLang) for the parity tests in tests/oracles/, and the
# real vLLM (its CPU build, .venv-vllm) that serves our drafts there and in `eagle3lab serve-check`.
ENGINES_STAMP := .venv-engines/.installed-stamp
VLLM_STAMP    := .venv-vllm/.installed-stamp
engines: $(ENGINES_STAMP) $(VLLM_STAMP)

$(ENGINES_STAMP): requirements-engines.lock scripts/engines-env.sh
	PY=$(PY) bash scripts/engines-env.sh
	touch $(ENGINES_STAMP)

$(VLLM_STAMP): requirements-vllm.lock scripts/vllm-env.sh
	PY=$(PY) bash scripts/vllm-env.sh
	touch $(VLLM_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check eagle3lab tests benchmarks

# ruff + the whole pytest suite (unit tests, every notebook executed, the engine parity tests).
# Two workers (pytest-xdist), whole files per worker: notebooks, engines and vLLM run in single-threaded
# subprocesses, so two at once use both cores; TEST_WORKERS=0 runs in one process.
# `make test` alone installs the three environments side by side: pip waits on disk and unpacking much of the
# time (on this 2-core machine: 161 s side by side with another job running, against 78 + 67 + 71 s one after
# the other). No --output-sync: it would hold pytest's progress back until the whole suite ends.
TEST_WORKERS ?= 2
ifeq ($(MAKECMDGOALS),test)
MAKEFLAGS += -j3
endif
test: lint engines
	$(BIN)/python -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests; that is a failure, not a pass" >&2; fi; \
	exit $$rc

workbook: $(STAMP)
	$(BIN)/eagle3lab workbook --out build/workbook $(if $(TRACK),--track $(TRACK))

# served from the repository root so the notebooks' ../docs/glossary.md links resolve; opens notebook 00
lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=. --LabApp.default_url=/lab/tree/notebooks/00_environment.ipynb

# Rebuild corpus split, tokenizer, target and drafts from the shipped corpus (about 90 minutes on 2 cores: target 25, healthy draft 42, case draft 21).
data: $(STAMP)
	$(BIN)/python -m eagle3lab.train.build_data --out data

# The real track's draft for SmolLM2-135M-Instruct (features captured once, then about 55 minutes of training
# on 2 cores; resumable from runs/real).
data-real: $(STAMP)
	$(BIN)/python -m eagle3lab.train.build_real --out data --run-dir runs/real

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_decode.py

# Re-resolve the lock from pyproject.toml (torch pinned without its local +cpu label).
lock: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev]' 'torch==2.13.0'
	{ head -3 requirements.lock; $(BIN)/python -m pip freeze --exclude-editable | grep -v '^eagle3lab' \
	  | sed 's/^torch==\([0-9.]*\)+cpu$$/torch==\1/'; } > requirements.lock.tmp && mv requirements.lock.tmp requirements.lock

clean:
	rm -rf build .pytest_cache
