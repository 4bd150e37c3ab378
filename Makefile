# Two commands: `make demo` and `make test`. Both set up what is missing first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
BASE   := $(VENV)/.installed-base
STAMP  := $(VENV)/.installed
TORCH_VERSION ?= 2.13.0
# The corpus mirror used when there is no internet (CI and these machines have one beside the checkout).
MIRROR ?= $(if $(BENCH_DATA_MIRROR),$(BENCH_DATA_MIRROR),../shared/data)

.PHONY: setup test demo gpu mutation clean

setup: $(STAMP)

# torch first, so that the rest resolves against it: the CPU build where there is no GPU. The demo needs only
# the package; the tests also need the dev extra (transformers and lm_eval for the pretrained-model tests).
$(BASE): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
		$(BIN)/pip install -q torch; \
	else \
		$(BIN)/pip install -q torch==$(TORCH_VERSION); \
	fi
	$(BIN)/pip install -q -e .
	touch $(BASE)

$(STAMP): $(BASE)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

demo: $(BASE)
	./scripts/demo.sh "$(BIN)" "$(MIRROR)"

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
	rm -rf $(VENV) *.egg-info .pytest_cache mutants
