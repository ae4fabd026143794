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

.PHONY: install system-deps test test-fast wheel-smoke check-sync readme slow docs docs-slow docs-test table1 reproduce mechanism-pilot mechanism mechanism-offpolicy mechanism-stable-a mechanism-stable-b mechanism-diversity mechanism-controls bench clean

# torch is installed first and pinned exactly: an unpinned torch pulls a multi-GB CUDA build; see docs/install.md.
$(BIN)/.installed: settings.ini setup.py requirements.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/pip check
	touch $@

install: $(BIN)/.installed system-deps

# The sandbox uses bubblewrap for isolation (ugttt.sandbox.confine); install it where we may, else it uses its own namespaces (mountns).
system-deps:
	@if ! command -v bwrap >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
	      || echo "warning: could not install bubblewrap; the sandbox will set up its namespaces itself (ugttt doctor)"; \
	  else echo "warning: bubblewrap (bwrap) not found and cannot be installed here; the sandbox will set up its namespaces itself (ugttt doctor)"; fi; \
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

# The pip user's path: a wheel built from this checkout (out of tree), installed with pip into a fresh venv that
# has only the pinned torch (no requirements.txt, no dev extras), then from a folder outside the checkout every public
# module imported, `ugttt doctor`, a 1-epoch tiny `ugttt train` and `ugttt report` (about 1.5 min idle), then the
# `notebooks` extra in the same venv and nbs/tutorials/01_one_group executed with papermill (tools/wheel_smoke.py).
wheel-smoke: install
	$(BIN)/python tools/wheel_smoke.py

# What CI runs (.ci/run). It took 36 min in CI on 2026-12-07 (2,148 s, a fresh machine), more than the 15-minute target (14-15 min
# when it was last that fast); the wheel smoke (now with a papermill run of a tutorial), then pytest with a line per test file
# and the 25 slowest tests at the end (tests marked slow and `#| slow` cells run in `make slow`).
test: install check-sync wheel-smoke
	$(BIN)/python -m pytest --strict-markers --durations=25 tests

# The fast loop, under 2 min on 2 cores: math, tasks and unit tests and the fast notebooks (markers: pytest.ini).
test-fast: install
	$(BIN)/python -m pytest -q --strict-markers -m "not (notebook or reproduce or training or model or sandbox or ray or large or docs or slow)" tests

# Everything: `make test`'s suite with the tests marked slow and the `#| slow` cells, and the wheel smoke of each extra
# ([ray], [trl], [tensorboard]: a fresh venv each, about a minute or two each).
slow: install
	$(BIN)/python tools/wheel_smoke.py --extras ray,trl,tensorboard
	UGTTT_SLOW=1 $(BIN)/python -m pytest --strict-markers --durations=25 tests

# The documentation site (tools/build_docs.py): every notebook executed into _build/docs (the committed ones stay
# clean; `#| slow` cells shown from docs/cache/slow_cells.json, with a note saying so), rendered with the README as
# its front page, docs/ and docs/results/ as pages; open _build/docs/html/index.html. A rebuild re-executes only the
# notebooks whose source or package changed. docs-slow also runs the slow cells and refreshes their cache.
$(BIN)/.docs-installed: settings.ini $(BIN)/.installed
	$(BIN)/pip install -q -c requirements.txt $$($(BIN)/python -c "import configparser as c; p = c.ConfigParser(); p.read('settings.ini'); print(p['DEFAULT']['extras_docs'])")
	touch $@

docs: install $(BIN)/.docs-installed
	nice -n 5 $(BIN)/python tools/build_docs.py

docs-slow: install $(BIN)/.docs-installed
	nice -n 5 $(BIN)/python tools/build_docs.py --slow

# The site checked in a real browser: builds it, then headless Chromium (Debian's chromium, installed here where we
# may) screenshots the index, 10_uncertainty and Table 1 into _build/docs/screenshots and checks math, figures, links.
docs-test: install $(BIN)/.docs-installed
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "warning: chromium not found and cannot be installed here; the browser test will be skipped"
	UGTTT_DOCS=1 $(BIN)/python -m pytest -q --strict-markers -m docs tests/test_docs.py

# The main job: Table 1 for the tiny preset (3 seeds x 4 tasks x 2 methods, about 11 min on 2 cores), printed at the end.
# Runs land in reproduce/runs and are reused by the other notebooks; outputs in reproduce/out. Override with e.g.
# `make table1 P='-y "seeds: [0, 1, 2, 3]"'` (papermill's -p passes a list as a string; lists go through -y).
table1: install
	mkdir -p reproduce/out
	cd reproduce && ../$(BIN)/papermill table1.ipynb out/table1.ipynb --no-progress-bar --log-output $(P)
	@echo; cat reproduce/out/table1.md

# Every reproduce notebook with its defaults (table1 first: the others reuse its runs).
reproduce: table1
	cd reproduce && for nb in table2 table3 table4 figure1 figure2 figure3; do \
	  ../$(BIN)/papermill $$nb.ipynb out/$$nb.ipynb --no-progress-bar $(P) || exit 1; done

# The mechanism study's regime pilot (docs/mechanism.md): the baseline at 3 learning rates x 2 KL coefficients and a
# no-learning control, 3 seeds, 20 epochs of 8 x 8 on CP26 (21 runs); prints the pilot table and the chosen regime.
mechanism-pilot: install
	mkdir -p reproduce/out
	cd reproduce && ../$(BIN)/papermill mechanism_pilot.ipynb out/mechanism_pilot.ipynb --no-progress-bar --log-output $(P)
	@echo; cat reproduce/out/mechanism_pilot.md

# The mechanism study's arms (docs/mechanism.md): control, baseline, ensemble_only, no_nnm, ugttt and
# ugttt_generator_ratio in the pilot's regime (the `mechanism` preset), 6 seeds (36 runs, 24 of them K = 5); prints the table.
mechanism: install
	mkdir -p reproduce/out
	cd reproduce && ../$(BIN)/papermill mechanism.ipynb out/mechanism.ipynb --no-progress-bar --log-output $(P)
	@echo; cat reproduce/out/mechanism.md

# The mechanism study's stage 3 (docs/mechanism.md): does the ensemble drift because it learns off-policy? Four new arms
# (own-sample training, the truncated behaviour weight) x 6 seeds beside stage 2's arms, read from docs/results where
# their runs are not here (seed 0 of baseline and ugttt retrained and checked first); about 2 hours on 2 cores.
mechanism-offpolicy: install
	mkdir -p reproduce/out
	cd reproduce && ../$(BIN)/papermill mechanism_offpolicy.ipynb out/mechanism_offpolicy.ipynb --no-progress-bar --log-output $(P)
	@echo; cat reproduce/out/mechanism_offpolicy.md

# The mechanism study's stage 4, part A (docs/mechanism.md; exploratory): five candidate settings and two diagnostics beside
# the baseline, ensemble_only and own-sample training, seeds 0 and 1, the replay of the retrained ensemble_only's updates,
# and the rule that chooses part B's candidates; about 75 min on 2 cores. Pass P='-p retrain_reused True' where the
# earlier stages' seed 0 does not reproduce (another CPU's kernels).
mechanism-stable-a: install
	mkdir -p reproduce/out
	cd reproduce && ../$(BIN)/papermill mechanism_stable_a.ipynb out/mechanism_stable_a.ipynb --no-progress-bar --log-output $(P)
	@echo; cat reproduce/out/mechanism_stable_a.md

mechanism-stable-b: install
	mkdir -p reproduce/out
	cd reproduce && ../$(BIN)/papermill mechanism_stable_b.ipynb out/mechanism_stable_b.ipynb --no-progress-bar --log-output $(P)
	@echo; cat reproduce/out/mechanism_stable_b.md

# The mechanism study's stage 5 (docs/mechanism.md; pre-registered): baseline, ensemble_only_drop, ugttt_drop and
# ugttt_drop_mi1 at lr 3e-3, 12 seeds (48 runs, about 2 hours two at a time on 2 cores), and item 2's U-points-at-rarity
# analysis. `P='-p train_only True'` trains (or resumes) without reading; `P='-p runs_dir /path'` keeps the runs elsewhere.
mechanism-diversity: install
	mkdir -p reproduce/out
	cd reproduce && ../$(BIN)/papermill mechanism_diversity.ipynb out/mechanism_diversity.ipynb --no-progress-bar --log-output $(P)
	@echo; cat reproduce/out/mechanism_diversity.md

# Stage 6 of the mechanism study (docs/mechanism.md): the rarity bonus and the shuffled-U control against stage 5's arms,
# 12 seeds. About 1.5 h on an idle 2-core machine if stage 5's runs are reused, 2.9 h if not.
mechanism-controls: install
	mkdir -p reproduce/out
	cd reproduce && ../$(BIN)/papermill mechanism_controls.ipynb out/mechanism_controls.ipynb --no-progress-bar --log-output $(P)
	@echo; cat reproduce/out/mechanism_controls.md

# speed and memory figures (printed, never asserted): every bench/ script, then one table of headline figures, each
# with the anchor it is compared with in the same run (bench/out/table.md; logs beside it). About 7 min on 2 cores;
# `make bench B=--quick` for short settings. bench/gpu_smoke.py measures only where a CUDA GPU is present.
bench: install
	$(BIN)/python bench/run_all.py $(B)

clean:
	rm -rf _proc _build .pytest_cache reproduce/out
