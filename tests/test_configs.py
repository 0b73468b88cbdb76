"""Every config in configs/ trains for a few steps on a tiny corpus."""

import json
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import DocBin

from .conftest import tiny_bilm

CONFIGS = Path(__file__).parent.parent / "configs"
NER_DATA = [
    ("Alice lives in Paris .", [(0, 5, "PER"), (15, 20, "LOC")]),
    ("Bob visited Berlin yesterday .", [(0, 3, "PER"), (12, 18, "LOC")]),
    ("The UN met in Geneva . It rained .", [(4, 6, "ORG"), (14, 20, "LOC")]),
]
CAT_DATA = [("great movie", ["POS"]), ("awful film", ["NEG"]), ("loved it , funny", ["POS", "FUNNY"])]
STEPS = ["--training.max_steps", "6", "--training.eval_frequency", "3"]


# The ELMo configs store no layers on the Doc (annotations only): loaded so, they keep them.
KEEP_LAYERS = {"components": {"elmo": {"store": "all"}}}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    nlp = spacy.blank("en")
    ner, cats, multi = DocBin(), DocBin(), DocBin()
    for text, ents in NER_DATA * 2:
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(s, e, label=label) for s, e, label in ents]
        ner.add(doc)
    for text, labels in CAT_DATA * 2:
        exclusive = nlp.make_doc(text)
        exclusive.cats = {"POS": float("POS" in labels), "NEG": float("NEG" in labels)}
        cats.add(exclusive)
        multilabel = nlp.make_doc(text)
        multilabel.cats = {label: float(label in labels) for label in ("POS", "NEG", "FUNNY")}
        multi.add(multilabel)
    for name, db in (("ner", ner), ("cats", cats), ("multi", multi)):
        db.to_disk(root / f"{name}.spacy")
    options, weights = root / "options.json", root / "weights.hdf5"
    tiny_bilm(seed=51).to_files(options, weights)
    vectors_txt = root / "vectors.txt"
    words = sorted({w for text, _ in NER_DATA + CAT_DATA for w in text.split()})
    rng = numpy.random.default_rng(0)
    vectors_txt.write_text(
        f"{len(words)} 5\n" + "".join(f"{w} " + " ".join(f"{x:.3f}" for x in rng.normal(size=5)) + "\n" for w in words)
    )
    subprocess.run(
        [sys.executable, "-m", "spacy", "init", "vectors", "en", str(vectors_txt), str(root / "vectors")],
        check=True,
        capture_output=True,
    )
    return root


def spacy_train(config, train, corpus, output, *extra, steps=STEPS):
    proc = subprocess.run(
        train_command(config, train, corpus, output, *extra, steps=steps), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def train_command(config, train, corpus, output, *extra, steps=STEPS):
    return [
        sys.executable,
        "-m",
        "spacy",
        "train",
        str(CONFIGS / config),
        "--output",
        str(output),
        "--paths.train",
        str(corpus / train),
        "--paths.dev",
        str(corpus / train),
        *steps,
        *extra,
    ]


# Each `spacy train` here is a process of its own (seconds of imports): the default run trains one
# config of each kind (ELMo at the input, with vectors, at the output, multilabel); `make test-slow` the rest.
SLOW = pytest.mark.slow
ELMO_RUNS = [
    ("ner_elmo.cfg", "ner.spacy", "ner"),
    pytest.param("ner_elmo_only.cfg", "ner.spacy", "ner", marks=SLOW),
    pytest.param("ner_elmo_only_encoder.cfg", "ner.spacy", "ner", marks=SLOW),
    pytest.param("ner_elmo_output.cfg", "ner.spacy", "ner", marks=SLOW),
    ("ner_vectors_elmo.cfg", "ner.spacy", "ner"),
    ("textcat_elmo_output.cfg", "cats.spacy", "textcat"),
    ("textcat_vectors_elmo.cfg", "cats.spacy", "textcat"),
    pytest.param("textcat_elmo.cfg", "cats.spacy", "textcat", marks=SLOW),
    pytest.param("textcat_elmo_only.cfg", "cats.spacy", "textcat", marks=SLOW),
    pytest.param("textcat_elmo_only_encoder.cfg", "cats.spacy", "textcat", marks=SLOW),
    ("textcat_multilabel_elmo.cfg", "multi.spacy", "textcat_multilabel"),
]


@pytest.mark.parametrize("config,train,component", ELMO_RUNS)
def test_elmo_configs_train_with_spacy_train(corpus, tmp_path, config, train, component):
    log = tmp_path / "log.jsonl"
    with_vectors = ["--paths.vectors", str(corpus / "vectors")] if "vectors" in config else []
    out = spacy_train(
        config,
        train,
        corpus,
        tmp_path,
        "--paths.elmo_options",
        str(corpus / "options.json"),
        "--paths.elmo_weights",
        str(corpus / "weights.hdf5"),
        "--training.logger.output_file",
        str(log),
        *with_vectors,
    )
    assert "Saved pipeline" in out
    # The biLM is frozen in every shipped config: its loss (always 0.00) is not a column.
    # (spaCy's loss columns are 8 wide: a long component name is not printed whole.)
    assert "LOSS ELMO" not in out and "LOSS " in out
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 3, 6]
    assert all({"epoch", "score", "seconds", "words", "losses", "scores"} <= set(r) for r in records)
    nlp = spacy.load(tmp_path / "model-last")
    # Only the output-side configs share a CNN tok2vec to concatenate ELMo with; the others
    # have their own embedding and encoder (ELMo enters the encoder) or no encoder (*_elmo_only).
    own_tok2vec = not any(kind in config for kind in ("elmo_output", "multilabel"))
    expected_pipeline = ["elmo", component] if own_tok2vec else ["elmo", "tok2vec", component]
    assert nlp.pipe_names == expected_pipeline
    mix = nlp.get_pipe("elmo").listener_mix_weights()[component][0]
    assert mix["weights"] != pytest.approx([1 / 3] * 3, abs=1e-6)  # the mix trained
    doc = nlp("Alice liked the film .")
    assert doc._.elmo_layers is None and ("spacy_elmo", "layers") not in doc.user_data  # annotations only
    kept = spacy.load(tmp_path / "model-last", config=KEEP_LAYERS)
    assert kept("Alice liked the film .")._.elmo_layers.shape == (3, 5, 16)  # the layers when asked for
    assert nlp.vocab.vectors.shape[0] > 0 if with_vectors else nlp.vocab.vectors.shape[0] == 0


def test_spacy_train_says_once_that_the_frozen_biLM_fills_its_cache(corpus, tmp_path):
    """The first epoch's cache filling was minutes of silence; 2 steps: the message once."""
    elmo_paths = [
        "--paths.elmo_options",
        str(corpus / "options.json"),
        "--paths.elmo_weights",
        str(corpus / "weights.hdf5"),
    ]
    steps = ["--training.max_steps", "2", "--training.eval_frequency", "1"]
    command = train_command("ner_elmo.cfg", "ner.spacy", corpus, tmp_path, *elmo_paths, steps=steps)
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = "[INFO] elmo: the frozen biLM runs once over each training sentence and caches its layers"
    assert proc.stderr.count(said) == 1, proc.stderr[-3000:]
    assert "elmo:" not in proc.stdout  # spaCy's table is left as it was


@pytest.mark.parametrize(
    "config,train,extra",
    [
        pytest.param("ner_cnn.cfg", "ner.spacy", [], marks=SLOW),
        pytest.param("textcat_cnn.cfg", "cats.spacy", [], marks=SLOW),
        ("textcat_bow.cfg", "cats.spacy", []),
        ("ner_vectors.cfg", "ner.spacy", ["--paths.vectors", "VECTORS"]),
        pytest.param("textcat_vectors.cfg", "cats.spacy", ["--paths.vectors", "VECTORS"], marks=SLOW),
    ],
)
def test_baseline_configs_train(corpus, tmp_path, config, train, extra):
    extra = [str(corpus / "vectors") if e == "VECTORS" else e for e in extra]
    spacy_train(config, train, corpus, tmp_path, *extra)
    nlp = spacy.load(tmp_path / "model-last")
    assert "elmo" not in nlp.pipe_names
    if extra:
        assert nlp.vocab.vectors.shape[1] == 5


def test_spacy_package_gives_the_same_vectors(corpus, tmp_path):
    spacy_train(
        "ner_elmo.cfg",
        "ner.spacy",
        corpus,
        tmp_path / "trained",
        "--paths.elmo_options",
        str(corpus / "options.json"),
        "--paths.elmo_weights",
        str(corpus / "weights.hdf5"),
    )
    trained = tmp_path / "trained" / "model-last"
    (tmp_path / "pkg").mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "spacy",
            "package",
            str(trained),
            str(tmp_path / "pkg"),
            "--build",
            "none",
            "--name",
            "elmo_test",
            "--version",
            "0.0.1",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    packaged = tmp_path / "pkg" / "en_elmo_test-0.0.1" / "en_elmo_test" / "en_elmo_test-0.0.1"
    original, copy = spacy.load(trained, config=KEEP_LAYERS), spacy.load(packaged, config=KEEP_LAYERS)
    text = "Bob met the UN in Geneva ."
    a, b = original(text), copy(text)
    numpy.testing.assert_allclose(a._.elmo_layers, b._.elmo_layers, atol=1e-6, rtol=0)
    assert [(e.text, e.label_) for e in a.ents] == [(e.text, e.label_) for e in b.ents]
    requirements = (tmp_path / "pkg" / "en_elmo_test-0.0.1" / "meta.json").read_text()
    assert "spacy-elmo" in requirements or "spacy_elmo" in requirements


def test_elmo_configs_use_the_bundled_biLM_without_weight_paths(corpus, tmp_path):
    from spacy_elmo.bilm import ElmoOptions
    from spacy_elmo.loaders import DEFAULT_BILM_DIR

    spacy_train("ner_elmo_only.cfg", "ner.spacy", corpus, tmp_path)  # no --paths.elmo_*
    nlp = spacy.load(tmp_path / "model-last", config=KEEP_LAYERS)
    bundled = ElmoOptions.from_file(DEFAULT_BILM_DIR / "options.json")
    assert nlp("Alice liked the film .")._.elmo_layers.shape == (3, 5, bundled.output_dim)
    assert nlp.get_pipe("elmo").model.get_dim("nO") == bundled.output_dim == 512


def test_spacy_train_with_elmo_options_and_no_weights_is_a_config_error_not_a_traceback(corpus, tmp_path):
    """It once printed 60 lines of traceback before the one line that said what to do."""
    cmd = train_command(
        "ner_elmo_only.cfg", "ner.spacy", corpus, tmp_path, "--paths.elmo_options", str(corpus / "options.json")
    )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "Config validation error" in proc.stdout
    assert "spacy-elmo.WeightsOrDefault.v1 -> weight_file\tnull, but options_file is set" in proc.stdout
    assert "--paths.elmo_weights" in proc.stdout


# The dev search's candidates (issue 30): fair pairs, configs/search/<task>_vectors[_elmo]_<kind>[_both].cfg.
SEARCH_CONFIGS = sorted(f"search/{p.name}" for p in (CONFIGS / "search").glob("*.cfg"))
TASK_CONFIGS = sorted(p.name for p in CONFIGS.glob("*.cfg") if not p.name.startswith("pretrain_")) + SEARCH_CONFIGS
# The default run checks the configs of the main tables and two search configs, one per task, with
# ELMo at both ends (a process each); `make test-slow` every search config.
SEARCH_IN_DEFAULT_RUN = {"search/ner_vectors_elmo_efficiency_both.cfg", "search/textcat_vectors_elmo_bilstm_both.cfg"}


def slow_search(configs):
    return [
        config
        if config in SEARCH_IN_DEFAULT_RUN or not config.startswith("search/")
        else pytest.param(config, marks=SLOW)
        for config in configs
    ]


@pytest.mark.parametrize("config", slow_search(TASK_CONFIGS))
def test_spacy_debug_config_accepts_every_shipped_task_config(corpus, config):
    """Complete configs (as `spacy init fill-config` makes them): spaCy's own checks pass."""
    train = corpus / train_file(config)
    cmd = [
        sys.executable,
        "-m",
        "spacy",
        "debug",
        "config",
        str(CONFIGS / config),
        "--paths.train",
        str(train),
        "--paths.dev",
        str(train),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Config is valid" in proc.stdout and "✘" not in proc.stdout


def spacy_debug_model(corpus, config, component):
    command = [sys.executable, "-m", "spacy", "debug", "model", str(CONFIGS / config), component]
    paths = ["--paths.train", str(corpus / "ner.spacy"), "--paths.dev", str(corpus / "ner.spacy")]
    elmo = ["--paths.elmo_options", str(corpus / "options.json"), "--paths.elmo_weights", str(corpus / "weights.hdf5")]
    return subprocess.run([*command, *paths, *(elmo if "elmo" in config else [])], capture_output=True, text=True)


@pytest.mark.parametrize("config,component", [("ner_cnn.cfg", "ner"), ("ner_elmo.cfg", "elmo")])
def test_spacy_debug_model_runs_to_the_end_on_spacys_tok2vec_listener_and_on_the_elmo_component(
    corpus, config, component
):
    proc = spacy_debug_model(corpus, config, component)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Successfully ended analysis" in proc.stdout


def test_spacy_debug_model_on_an_elmo_listener_names_itself_and_the_way_around(corpus):
    """spaCy's debug model updates the upstream of listeners named tok2vec-listener or
    transformer-listener only (spacy/cli/debug_model.py): the ELMo listener's elmo never runs
    there. The error once sent the user to [training] settings that do not apply."""
    proc = spacy_debug_model(corpus, "ner_elmo.cfg", "ner")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "spacy debug model runs the upstream of spaCy's own listeners only" in last
    assert "`spacy debug model CONFIG elmo`" in last and "annotating_components" not in proc.stderr


def test_spacy_init_fill_config_adds_nothing_to_any_shipped_task_config(tmp_path):
    """docs/training.md calls every config complete: spaCy's fill-config (run in-process, as its CLI
    does) fills no setting into any of them (it once added the elmo component's precision and
    vector_hooks). Compared as configs: fill-config also moves sections, which changes no setting."""
    from spacy.cli.init_config import fill_config

    filled_by = {}
    for config in TASK_CONFIGS:
        before, after = fill_config(tmp_path / "filled.cfg", CONFIGS / config, silent=True)
        if before != after:
            filled_by[config] = sorted(set(_settings(after)) - set(_settings(before)))
    assert not filled_by


def _settings(config, prefix=""):
    """Every setting of a config as "section.key = value" lines."""
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _settings(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key} = {value!r}"


def train_file(config: str) -> str:
    return "multi.spacy" if "multilabel" in config else "cats.spacy" if "textcat" in config else "ner.spacy"


@pytest.mark.parametrize("config", slow_search(SEARCH_CONFIGS))
def test_every_search_config_trains_two_steps(corpus, tmp_path, config):
    component = "textcat" if "textcat" in config else "ner"
    with_elmo = "_elmo" in config
    elmo_paths = [
        "--paths.elmo_options",
        str(corpus / "options.json"),
        "--paths.elmo_weights",
        str(corpus / "weights.hdf5"),
    ]
    spacy_train(
        config,
        train_file(config),
        corpus,
        tmp_path,
        "--paths.vectors",
        str(corpus / "vectors"),
        *(elmo_paths if with_elmo else []),
        steps=["--training.max_steps", "2", "--training.eval_frequency", "1"],
    )
    # The configs store no layers on the Doc: keep them to read them and feed the tok2vec below.
    nlp = spacy.load(tmp_path / "model-last", config=KEEP_LAYERS if with_elmo else {})
    assert nlp.pipe_names == (["elmo", component] if with_elmo else ["tok2vec", component])
    assert nlp.vocab.vectors.shape[1] == 5
    if with_elmo:
        # "both": one listener at the encoder's input, one at its output, each with its own mix.
        mixes = nlp.get_pipe("elmo").listener_mix_weights()[component]
        assert len(mixes) == (2 if config.endswith("_both.cfg") else 1)
        doc = nlp("Alice liked the film .")
        assert doc._.elmo_layers.shape == (3, 5, 16)
        # The outermost ElmoTok2Vec (walk() goes from the top): the one with "embed" and "elmo" refs.
        model = nlp.get_pipe(component).model
        tok2vec = next(node for node in model.walk() if node.has_ref("elmo") and node.has_ref("embed"))
        width = 400 if "bilstm" in config else 256 if "_acc" in config else 96
        expected = width + 16 if config.endswith("_both.cfg") else width
        assert tok2vec.predict([doc])[0].shape == (5, expected)


PRETRAIN_CONFIGS = sorted(p.name for p in CONFIGS.glob("pretrain_*.cfg"))


@pytest.mark.parametrize("config", PRETRAIN_CONFIGS)
def test_every_shipped_pretrain_config_loads_with_the_paths_its_usage_line_gives(config):
    from spacy_elmo.pretrain import load_config

    text = (CONFIGS / config).read_text(encoding="utf8")
    paths = {"paths.train": "train.txt", "paths.dev": "dev.txt"}
    if "--paths.init_dir" in text:
        paths["paths.init_dir"] = "bilm"
    if "--paths.output_vectors" in text:
        paths["paths.output_vectors"] = "vectors"
    loaded = load_config(CONFIGS / config, paths)
    assert loaded["training"]["max_steps"] >= 1
    # A widening warm start names its width; nothing else widens.
    assert (loaded["warm_start"]["projection_dim"] is not None) == (config == "pretrain_en_wide.cfg")
