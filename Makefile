# Set-up and main jobs. Each target creates/refreshes the local virtual environment first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test test-all bench install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# the tests also run the optional integrations (Brax): CI installs them so those tests run
$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,rl]"
	touch $(TEST_STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/jaxcontact demo

# --dist loadfile: each test module runs in one worker, so its module fixtures (the compiled
# programs they share) are built once rather than once per worker
test: $(TEST_STAMP)
	$(PY) -m pytest -m "not slow" -n auto --dist loadfile

test-all: $(TEST_STAMP)
	$(PY) -m pytest -n auto --dist loadfile

bench: $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,bench]"
	$(PY) benchmarks/throughput.py
	$(PY) benchmarks/gradient.py

clean:
	rm -rf $(VENV) .jax_cache results
