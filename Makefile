# Set-up and main jobs. Each target creates/refreshes the local virtual environment first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
DOCS_STAMP := $(VENV)/.installed-docs
# pip quietly; PYTHONWARNINGS reaches the build backend, whose notice on every editable
# install of a flat layout ("BuildBackendWarning: Editable installation ...") is not ours
PIP := PYTHONWARNINGS=ignore $(PY) -m pip install --quiet

.PHONY: demo test test-all bench experiments install clean docs browser

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e ".[test]"
	touch $(STAMP)

# the tests also run the optional integrations (Brax): CI installs them so those tests run
$(TEST_STAMP): $(STAMP)
	$(PIP) -e ".[test,rl]"
	touch $(TEST_STAMP)

# the viewer's tests (tests/viz/test_html.py) drive a headless Chromium: install it where it is
# missing and apt-get can; without it those tests skip
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && apt-get update -qq >/dev/null 2>&1 && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; } || \
	  echo "chromium not installed (apt-get missing or not root): the viewer's browser tests skip"

$(DOCS_STAMP): $(STAMP)
	$(PIP) -e ".[docs]"
	touch $(DOCS_STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/jaxcontact demo

# --dist loadfile: each test module runs in one worker, so its module fixtures (the compiled
# programs they share) are built once rather than once per worker
test: $(TEST_STAMP) browser
	$(PY) -m pytest -m "not slow" -n auto --dist loadfile

test-all: $(TEST_STAMP) browser
	$(PY) -m pytest -n auto --dist loadfile

# every experiment's --quick run, one process each, and an index of their claims
# (results/experiments/index.md; `python -m experiments --help`)
experiments: $(TEST_STAMP)
	$(PY) -m experiments

# the benchmark suite, each benchmark in its own process and MuJoCo MJX measured in the same
# run (benchmarks/mjx.py): results/benchmarks/summary.json and summary.md, exit status 1 if a
# benchmark failed (`python -m benchmarks --help`). About 40 minutes on two cores;
# `make bench BENCH=--quick` about 3, `BENCH="--only throughput gradient"` a part
BENCH ?=
bench: $(STAMP)
	$(PIP) -e ".[test,bench]"
	$(PY) -m benchmarks $(BENCH)

# the API reference from the docstrings (mkdocs.yml); --strict: any warning (a docstring
# griffe cannot parse, a broken link or reference) fails the build
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .jax_cache results site
