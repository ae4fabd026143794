# ugttt developer and CI entry points. `make test` alone installs what is missing and runs the whole suite.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TRANSFORMERS_VERBOSITY := error
export TOKENIZERS_PARALLELISM := false
export PYTHONHASHSEED := 0

.PHONY: install system-deps test check-sync readme slow table1 bench clean

# torch is installed first and pinned exactly: an unpinned torch pulls a multi-GB CUDA build; see docs/install.md.
$(BIN)/.installed: settings.ini setup.py requirements.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/pip check
	touch $@

install: $(BIN)/.installed system-deps

# The sandbox uses bubblewrap for isolation (ugttt.sandbox); install it where we may, else the sandbox falls back and warns.
system-deps:
	@if ! command -v bwrap >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
	      || echo "warning: could not install bubblewrap; the sandbox will use its fallback isolation"; \
	  else echo "warning: bubblewrap (bwrap) not found and cannot be installed here; the sandbox will use its fallback isolation"; fi; \
	fi

# Notebooks are the source: exporting and cleaning must change nothing, README.md is generated from nbs/00_index,
# and nothing a user reads cites a document outside the repository.
check-sync: install
	$(BIN)/python tools/check_sync.py
	$(BIN)/python tools/make_readme.py --check
	$(BIN)/python tools/check_citations.py

# README.md from its source, nbs/00_index.ipynb
readme: install
	$(BIN)/python tools/make_readme.py

test: install check-sync
	$(BIN)/python -m pytest -q tests

slow: install
	UGTTT_SLOW=1 $(BIN)/python -m pytest -q tests

table1: install
	@if [ -f reproduce/table1.ipynb ]; then $(BIN)/papermill reproduce/table1.ipynb reproduce/out/table1.ipynb --no-progress-bar; \
	else echo "reproduce/table1.ipynb does not exist yet (it comes with the trainer); nothing to run"; exit 2; fi

# speed and memory figures (printed, not asserted): MI kernel memory and in-place buffers, sandbox throughput,
# embedded model quality, ensemble scoring and generation, update memory, seconds per training epoch
bench: install
	$(BIN)/python bench/mi_memory.py
	$(BIN)/python bench/inplace_buffers.py
	$(BIN)/python bench/sandbox_throughput.py
	$(BIN)/python bench/default_model_quality.py
	$(BIN)/python bench/policy_scoring.py
	$(BIN)/python bench/policy_generation.py
	$(BIN)/python bench/update_memory.py
	$(BIN)/python bench/trainer_epoch.py

clean:
	rm -rf _proc .pytest_cache reproduce/out
