# Two commands: `make demo` and `make test`. Both set up what is missing first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
BASE   := $(VENV)/.installed-base
STAMP  := $(VENV)/.installed
TORCH_VERSION ?= 2.13.0
# Where there is a GPU: the torch the GPU sessions ran (2.11.0+cu130, results/reference/speed-h200.md); its wheel
# pins its CUDA libraries exactly.
TORCH_CUDA_VERSION ?= 2.11.0
# The corpus mirror used when there is no internet (CI and these machines have one beside the checkout).
MIRROR ?= $(if $(BENCH_DATA_MIRROR),$(BENCH_DATA_MIRROR),../shared/data)

.PHONY: setup test demo docs docs-serve gpu mutation clean

setup: $(STAMP)

# torch first, so that the rest resolves against it: the CPU build where there is no GPU. Then the exact versions
# of requirements/ (the lock), and this package without resolving anything more. The demo needs only base.txt;
# the tests also dev.txt (transformers, lm_eval, tensorboard and pytest) and docs.txt (mkdocs: the tests build the
# documentation site).
$(BASE): pyproject.toml requirements/base.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
		$(BIN)/pip install -q torch==$(TORCH_CUDA_VERSION); \
	else \
		$(BIN)/pip install -q torch==$(TORCH_VERSION); \
	fi
	$(BIN)/pip install -q -r requirements/base.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(BASE)

$(STAMP): $(BASE) requirements/dev.txt requirements/docs.txt
	$(BIN)/pip install -q -r requirements/dev.txt
	$(BIN)/pip install -q -r requirements/docs.txt
	touch $(STAMP)

# The suite on one worker process per core this process may use (TEST_WORKERS=0: all in one process). A module runs
# whole on one worker, so that its trained fixtures are made once, and the modules go out in the order
# tests/conftest.py gives them (the longest first), each worker on one CPU thread.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(len(os.sched_getaffinity(0)))" 2>/dev/null || echo 1)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The demo says how long its set-up took (nothing when the environment was there) and how long its own work.
demo:
	@start=$$(date +%s); $(MAKE) --no-print-directory $(BASE); \
		echo "set-up: $$(( $$(date +%s) - start )) s"
	./scripts/demo.sh "$(BIN)" "$(MIRROR)"

# The documentation site (mkdocs.yml): `make docs` builds it into site/ in strict mode (a broken link, anchor or
# include fails the build), `make docs-serve` serves it at http://127.0.0.1:8000 and rebuilds it when a page changes.
# NO_MKDOCS_2_WARNING: the material theme's notice of its own end of life, printed at every build, says nothing of
# this site.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The GPU runbook, one stage at a time: make gpu STAGE=prove|diagnose|speed|study OUT=gpu-out (scripts/gpu/README.md).
STAGE ?= prove
OUT   ?= gpu-out
gpu: $(STAMP)
	PYTHON=$(BIN)/python ./scripts/gpu/runbook.sh $(STAGE) $(OUT)

# Mutation testing of the core modules ([tool.mutmut] in pyproject.toml; not in CI). It resumes where it stopped;
# the survivors: $(BIN)/mutmut results, one of them: $(BIN)/mutmut show NAME.
mutation: $(STAMP)
	$(BIN)/pip install -q 'mutmut>=3.8,<4'
	BENCH_DATA_MIRROR=$(abspath $(MIRROR)) $(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache mutants site
