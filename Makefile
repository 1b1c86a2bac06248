# Two commands do all the set-up on a fresh machine:
#   make lab    build .venv if missing, install the course into it, open JupyterLab on notebooks/
#   make test   the same set-up, then every test (CI runs this)
# The install is the course folder's pinned one with the grader and the test tools:
# `pip install -e '.[instructor,test,hub]'`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.course-installed
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: venv lab lint format test test-fast release check bundle bench hub-up hub-down clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (nbgrader 0.9.6). Run: make PYTHON=python3.11 ...")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[instructor,test,hub]'
	@# jsonschema imports rfc3987-syntax (pulled in by jupyter-events' format extra) at import time, and
	@# it compiles 38 grammars there: 2 s in every process that imports nbformat (jsonschema issue
	@# 1428). It only checks the "iri" format, which nothing here validates; jsonschema works without it.
	$(BIN)/python -m pip uninstall --quiet --yes rfc3987-syntax
	@touch $(STAMP)

venv: $(STAMP)

# The learner's lab: nbgrader's instructor extensions (formgrader, Create Assignment) are switched off
# for this server by jupyter/learner (the instructor opens formgrader with `cd OUT && jupyter lab`).
lab: venv
	JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter/learner$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH} \
	  $(BIN)/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root,)

# A demo class on JupyterHub on this machine (as root: real Unix users, each server spawned as its user): an
# instructor and LEARNERS learners, the release in notebooks/ fetched from nbgrader's Assignments tab; the logins
# are printed. hub-down stops the hub and removes the class's users and folders. hub/classroom.py; HUB_ROOT
# (default /srv/serving-overlap-hub) holds the hub's own Python and proxy, built once.
LEARNERS ?= 3
hub-up: venv
	$(BIN)/python hub/classroom.py up --learners $(LEARNERS)

hub-down: venv
	$(BIN)/python hub/classroom.py down

# ruff (pyproject.toml [tool.ruff]: the linter and the formatter, which `make format` applies) and the
# import rules ([tool.importlinter]): seconds
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Two test processes (pytest-xdist), each test file whole in one of them, so that a file's shared
# grading batch is built once: 493 s against 700 s in one process on 2 cores (measured). TEST_WORKERS=0
# runs everything in this process (for a debugger, or to read one failure's output in order).
TEST_WORKERS ?= 2
test: venv lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=15

test-fast: venv
	$(BIN)/python -m pytest -m "not slow and not browser"

release: venv
	$(BIN)/python -m autograde release

check: venv
	$(BIN)/python -m autograde check

bundle: venv
	$(BIN)/python -m autograde bundle

bench: venv
	$(BIN)/python benchmarks/bench_cpu_overlap.py
	$(BIN)/python benchmarks/bench_parallel_grading.py
	$(BIN)/python benchmarks/bench_sandbox_cost.py
	$(BIN)/python benchmarks/bench_course_speed.py
	$(BIN)/python benchmarks/bench_handoff_sim.py --no-million

clean:
	rm -rf .course_build dist artifacts .pytest_cache
