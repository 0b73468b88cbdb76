# One command per job on a fresh machine (Python 3.11 + pip, no torch needed):
#   make test   - create .venv, install everything, run the test suite
#   make demo   - create .venv, install everything, run the project's demo workflow
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A local CPU build; a bare "torch" would pull GBs of CUDA wheels.
TORCH_VERSION ?= 2.13.0
PYTEST_ARGS ?=

.PHONY: setup test test-slow demo embed-sample bench clean

setup: $(VENV)/.installed

# about.py holds the version: the installed metadata (what `spacy package` pins) must follow it.
$(VENV)/.installed: setup.py spacy_elmo/about.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "torch==$(TORCH_VERSION)"
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

test: setup
	$(PY) -m pytest -q tests $(PYTEST_ARGS)

test-slow: setup
	$(PY) -m pytest -q tests -m slow $(PYTEST_ARGS)

demo: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m spacy project run demo

embed-sample: setup
	$(PY) -m spacy_elmo embed tests/data/sample_sentences.txt sample_embeddings.hdf5 \
		--options-file tests/data/bilm_tf_reference/options.json \
		--weight-file tests/data/bilm_tf_reference/lm_weights.hdf5 --layers all

bench: setup
	$(PY) benchmarks/bench_bilm.py

clean:
	rm -rf $(VENV) build *.egg-info
