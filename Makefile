# One command per job on a fresh machine (Python 3.11 + pip, no torch needed):
#   make test   - create .venv, install everything, run the lint/type gate and the test suite
#   make lint   - the gate alone: ruff (lint and format check) and mypy on spacy_elmo/, scripts/ and benchmarks/
#   make demo   - create .venv, install everything, run the project's demo workflow
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch's CPU build, pinned: a bare "torch" pulls GBs of CUDA wheels, and on Linux so does a
# pinned one from a default index. TORCH_PIP_ARGS tells pip where the CPU build is
# (e.g. "--index-url <PyTorch's CPU wheel index>" or "--find-links DIR").
TORCH_VERSION ?= 2.13.0
TORCH_PIP_ARGS ?=
PYTEST_ARGS ?=

.PHONY: setup lint test test-slow test-floors demo embed-sample bench bench-bf16 bench-pipelines clean

setup: $(VENV)/.installed

# about.py holds the version: the installed metadata (what `spacy package` pins) must follow it.
$(VENV)/.installed: setup.py spacy_elmo/about.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_PIP_ARGS) "torch==$(TORCH_VERSION)"
	$(PY) -m pip install --quiet -e ".[test,project]"  # project: matplotlib, for the demo's and the tests' plots
	touch $@

# mypy's files (spacy_elmo/, scripts/, benchmarks/) are listed in pyproject.toml.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# No -q: quiet pytest prints no file names, only lines of dots; by default each test file gets a
# line with its percentage. --durations lists the slowest, to keep the default run short.
test: lint
	$(PY) -m pytest tests --durations=15 $(PYTEST_ARGS)

test-slow: setup
	$(PY) -m pytest tests -m slow --durations=15 $(PYTEST_ARGS)

# setup.py's floors tested: on each Python its range covers that this machine has, a fresh
# environment with the oldest requirements it allows, then a subset of the fast tests (.ci/floors
# says which). Not in CI: torch's wheels from the package registry are multi-GB CUDA builds.
test-floors:
	TORCH_PIP_ARGS="$(TORCH_PIP_ARGS)" .ci/floors

demo: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m spacy project run demo

embed-sample: setup
	$(PY) -m spacy_elmo embed tests/data/sample_sentences.txt sample_embeddings.hdf5 \
		--options-file tests/data/bilm_tf_reference/options.json \
		--weight-file tests/data/bilm_tf_reference/lm_weights.hdf5 --layers all --overwrite

bench: setup
	$(PY) benchmarks/bench_bilm.py

# The bf16 rows of docs/speed.md, three runs each (their median is what the table quotes):
# pretraining and embedding, fp32 beside bf16 (and int8) in every run. Run it alone on the
# machine, on a CPU with native bf16; the embedding runs read CoNLL dev (`spacy project run
# fetch-conll` then `prepare-conll`).
bench-bf16: setup
	for run in 1 2 3; do $(PY) benchmarks/bench_pretrain.py --config configs/pretrain_en_wide.cfg --precision fp32 bf16 --repeats 3; done
	for run in 1 2 3; do $(PY) benchmarks/bench_bilm.py --text corpus/conll/dev.spacy; done

# Words/s of whole NER pipelines (CNN, vectors, ELMo, a roberta-base-sized transformer)
# on CoNLL's test sentences (built by the project's workflow); needs the bench extra.
bench-pipelines: setup
	$(PY) -m pip install --quiet -e ".[bench]"
	$(PY) benchmarks/bench_pipelines.py corpus/conll/test.spacy --vectors assets/en_core_web_md

clean:
	rm -rf $(VENV) build *.egg-info
