"""subsets + learning_curve: nested seeded subsets, the plot and table from the runs' scores."""

import json

import learning_curve
import pytest
import spacy
import subsets
import typer
from spacy.tokens import Doc, DocBin
from typer.testing import CliRunner


def test_subsets_are_seeded_prefixes_of_one_order_and_nest():
    counts = [10, 3, 7, 1, 9, 4, 6, 2, 8, 5]  # 55 sentences
    chosen = subsets.nested_subsets(counts, [5, 25, 50], seed=3)
    small, medium, large = chosen["train_5pct"], chosen["train_25pct"], chosen["train_50pct"]
    assert set(small) <= set(medium) <= set(large)
    assert sum(counts[i] for i in medium) >= 0.25 * 55
    # the shortest prefix: without its last document it would hold too few
    assert subsets.nested_subsets(counts, [25], seed=3) == {"train_25pct": medium}
    assert subsets.nested_subsets(counts, [25], seed=4) != {"train_25pct": medium}


def _docbin(path, n_docs):
    nlp = spacy.blank("en")
    docs = []
    for k in range(n_docs):
        doc = Doc(nlp.vocab, words=["One", ".", "Two", "."], sent_starts=[True, False, True, False])
        doc.user_data["k"] = k
        docs.append(doc)
    DocBin(docs=docs, store_user_data=True).to_disk(path)


def test_subsets_command_writes_the_sample_down_and_refuses_a_silent_change(tmp_path, monkeypatch):
    train = tmp_path / "train.spacy"
    _docbin(train, 20)  # 40 sentences
    app = subsets.app
    result = CliRunner().invoke(app, [str(train), str(tmp_path / "out"), "--percents", "10,50"])
    assert result.exit_code == 0, result.output
    listing = json.loads((tmp_path / "out" / "subsets.json").read_text())
    assert listing["total_sentences"] == 40
    assert listing["subsets"]["train_10pct"]["sentences"] == 4 and listing["subsets"]["train_50pct"]["sentences"] == 20
    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(tmp_path / "out" / "train_10pct.spacy").get_docs(nlp.vocab))
    assert sorted(d.user_data["k"] for d in docs) == listing["subsets"]["train_10pct"]["docs"]
    monkeypatch.setattr(subsets, "nested_subsets", lambda counts, percents, seed: {"train_10pct": [0, 1]})
    result = CliRunner().invoke(app, [str(train), str(tmp_path / "out"), "--percents", "10"])
    assert result.exit_code != 0 and "differs from the subset written down" in str(result.exception)
    (tmp_path / "out" / "subsets.json").write_text('{"train_sha256": "', encoding="utf8")  # cut short
    result = CliRunner().invoke(app, [str(train), str(tmp_path / "out"), "--percents", "10"])
    assert result.exit_code != 0 and "subsets.json: not a valid JSON file" in str(result.exception)


def _metrics(folder, seed, key, score):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed{seed}.json").write_text(json.dumps({"test": {key: score}}))


def test_plot_shows_each_run_at_each_size_and_checks_the_target(tmp_path):
    subsets_dir = tmp_path / "subsets"
    subsets_dir.mkdir()
    (subsets_dir / "subsets.json").write_text(
        json.dumps(
            {
                "total_sentences": 1000,
                "seed": 13,
                "train_sha256": "x",
                "subsets": {
                    "train_1pct": {"docs": [1], "sentences": 10},
                    "train_5pct": {"docs": [1, 2], "sentences": 50},
                },
            }
        )
    )
    metrics = tmp_path / "metrics"
    for seed in (0, 1, 2):
        for run, base in (("ner_cnn", 0.50), ("ner_vectors", 0.60), ("ner_vectors_elmo", 0.65), ("ner_elmo", 0.55)):
            _metrics(metrics / learning_curve.curve_name(run, "train_1pct"), seed, "ents_f", base + seed / 100)
            _metrics(metrics / learning_curve.curve_name(run, "train_5pct"), seed, "ents_f", base + 0.1)
    _metrics(metrics / "ner_vectors", 0, "ents_f", 0.85)  # the 100% point: the main run
    result = CliRunner().invoke(
        learning_curve.app, ["plot", str(metrics), str(tmp_path / "reports"), "--subsets", f"ner={subsets_dir}"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "reports" / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    text = (tmp_path / "reports" / "learning_curve.md").read_text()
    assert "| `ner_cnn` | 51.00 ± 1.00 | 60.00 ± 0.00 |  |" in text
    assert "| `ner_vectors` | 61.00 ± 1.00 | 70.00 ± 0.00 | 85.00 (1 seed) |" in text
    assert "train_1pct: `ner_vectors_elmo` vs `ner_vectors`: +5.00 F1 (target >= +3.0): **met**" in text


def test_run_needs_the_subsets_first(tmp_path):
    (tmp_path / "dev.spacy").write_bytes(b"")
    result = CliRunner().invoke(
        learning_curve.app, ["run", "ner", str(tmp_path), str(tmp_path / "dev.spacy"), str(tmp_path / "dev.spacy")]
    )
    assert result.exit_code != 0 and "run scripts/subsets.py first" in str(result.exception)
    result = CliRunner().invoke(
        learning_curve.app, ["run", "pos", str(tmp_path), str(tmp_path / "dev.spacy"), str(tmp_path / "dev.spacy")]
    )
    assert result.exit_code != 0 and "TASK must be one of" in result.output


def test_run_trains_the_smallest_subset_first(tmp_path):
    for percent in ("25", "10", "1", "5", "2.5"):
        (tmp_path / f"train_{percent}pct.spacy").write_bytes(b"")
    (tmp_path / "train.spacy").write_bytes(b"")
    (tmp_path / "train_allpct.spacy").write_bytes(b"")
    found = [path.name for path in learning_curve.subset_files(tmp_path)]
    assert found == [
        "train_1pct.spacy",
        "train_2.5pct.spacy",
        "train_5pct.spacy",
        "train_10pct.spacy",
        "train_25pct.spacy",
    ]


def test_runs_picks_some_configs_in_curve_order_and_rejects_unknown_names():
    picked = learning_curve.selected_runs("ner", "ner_vectors, ner_cnn")
    assert [run for run, _, _ in picked] == ["ner_cnn", "ner_vectors"]
    assert learning_curve.selected_runs("ner", None) == learning_curve.CURVE["ner"]
    for bad in ("ner_cnn,ner_bert", ","):
        with pytest.raises(typer.BadParameter, match="not among ner's runs"):
            learning_curve.selected_runs("ner", bad)


CHOSEN_CONFIGS = [
    "--config",
    "ner_vectors_acc=configs/search/ner_vectors_bilstm.cfg",
    "--config",
    "ner_vectors_elmo_acc=configs/search/ner_vectors_elmo_bilstm_both.cfg",
]


@pytest.fixture
def curve_calls(tmp_path, monkeypatch):
    """Empty subsets at 1/5/10/25% and split files; run_seed recorded, not run."""
    for percent in ("1", "5", "10", "25"):
        (tmp_path / f"train_{percent}pct.spacy").write_bytes(b"")
    (tmp_path / "dev.spacy").write_bytes(b"")
    calls = []
    monkeypatch.setattr(
        learning_curve, "run_seed", lambda config, train, *args, **kw: calls.append((config, train, args + (kw,)))
    )
    return tmp_path, calls


def run_ner(folder, *args):
    split = str(folder / "dev.spacy")
    return CliRunner().invoke(learning_curve.app, ["run", "ner", str(folder), split, split, "--seeds", "0", *args])


def test_the_chosen_pair_trains_its_vars_configs_on_its_own_subsets_only(curve_calls):
    folder, calls = curve_calls
    result = run_ner(
        folder, "--runs", "ner_vectors,ner_vectors_acc,ner_vectors_elmo_acc", "--bilm-dir", "b", *CHOSEN_CONFIGS
    )
    assert result.exit_code == 0, result.output
    trained = [(args[2], str(config)) for config, _, args in calls]  # (run name, config)
    assert trained == [
        ("curve_ner_vectors_1pct", "configs/ner_vectors.cfg"),
        ("curve_ner_vectors_acc_1pct", "configs/search/ner_vectors_bilstm.cfg"),
        ("curve_ner_vectors_elmo_acc_1pct", "configs/search/ner_vectors_elmo_bilstm_both.cfg"),
        ("curve_ner_vectors_5pct", "configs/ner_vectors.cfg"),
        ("curve_ner_vectors_acc_5pct", "configs/search/ner_vectors_bilstm.cfg"),
        ("curve_ner_vectors_elmo_acc_5pct", "configs/search/ner_vectors_elmo_bilstm_both.cfg"),
        ("curve_ner_vectors_10pct", "configs/ner_vectors.cfg"),
        ("curve_ner_vectors_25pct", "configs/ner_vectors.cfg"),
    ]
    elmo_overrides = next(args[4] for _, _, args in calls if args[2] == "curve_ner_vectors_elmo_acc_1pct")
    assert elmo_overrides == [
        "--paths.vectors",
        "assets/en_core_web_md",
        "--paths.elmo_options",
        "b/options.json",
        "--paths.elmo_weights",
        "b/weights.hdf5",
    ]
    # without --runs: today's runs only, on every subset (the learning-curve command's first lines)
    calls.clear()
    assert run_ner(folder).exit_code == 0
    assert len(calls) == 4 * 4 and not any("_acc_" in args[2] for _, _, args in calls)


def test_the_chosen_pair_needs_its_configs_and_its_subsets_before_any_training(curve_calls):
    folder, calls = curve_calls
    result = run_ner(folder, "--runs", "ner_vectors_acc", CHOSEN_CONFIGS[2], CHOSEN_CONFIGS[3])
    assert result.exit_code != 0 and "ner_vectors_acc need(s) --config RUN=CONFIG" in result.output
    result = run_ner(folder, "--config", "ner_cnn=configs/ner_elmo.cfg")
    assert result.exit_code != 0 and "ner_cnn not among ner's chosen pair" in result.output
    result = run_ner(folder, "--runs", "ner_vectors_acc", "--config", "ner_vectors_acc")
    assert result.exit_code != 0 and "expected RUN=CONFIG, got 'ner_vectors_acc'" in result.output
    (folder / "train_5pct.spacy").unlink()
    result = run_ner(folder, "--runs", "ner_cnn,ner_vectors_acc", *CHOSEN_CONFIGS[:2])
    assert result.exit_code != 0 and "no train_5pct.spacy for the chosen pair" in str(result.exception)
    assert calls == []
    # today's runs alone do not need the chosen pair's subsets
    assert run_ner(folder, "--runs", "ner_cnn").exit_code == 0 and len(calls) == 3


def test_the_chosen_pair_has_its_own_curve_and_its_1pct_target(tmp_path):
    subsets_dir = tmp_path / "subsets"
    subsets_dir.mkdir()
    listing = {"1pct": 10, "5pct": 50, "25pct": 250}
    (subsets_dir / "subsets.json").write_text(
        json.dumps(
            {
                "total_sentences": 1000,
                "subsets": {f"train_{name}": {"docs": [1], "sentences": n} for name, n in listing.items()},
            }
        )
    )
    metrics = tmp_path / "metrics"
    for seed in (0, 1, 2):
        for run, base in (("ner_vectors", 0.60), ("ner_vectors_elmo", 0.65), ("ner_vectors_acc", 0.70)):
            for subset in ("train_1pct", "train_5pct", "train_25pct"):
                _metrics(metrics / learning_curve.curve_name(run, subset), seed, "ents_f", base)
        _metrics(metrics / "curve_ner_vectors_elmo_acc_1pct", seed, "ents_f", 0.775)
        _metrics(metrics / "curve_ner_vectors_elmo_acc_5pct", seed, "ents_f", 0.80)
    _metrics(metrics / "ner_vectors_elmo_acc", 0, "ents_f", 0.90)
    result = CliRunner().invoke(
        learning_curve.app, ["plot", str(metrics), str(tmp_path / "reports"), "--subsets", f"ner={subsets_dir}"]
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "reports" / "learning_curve.md").read_text()
    assert "| `ner_vectors_elmo_acc` | 77.50 ± 0.00 | 80.00 ± 0.00 |  | 90.00 (1 seed) |" in text
    assert "- train_1pct: `ner_vectors_elmo` vs `ner_vectors`: +5.00 F1 (target >= +3.0): **met**" in text
    assert "- train_5pct: `ner_vectors_elmo` vs `ner_vectors`: +5.00 F1 (target >= +3.0): **met**" in text
    target = (
        "- train_1pct: `ner_vectors_elmo_acc` vs `ner_vectors_acc`: +7.50 F1 (target >= +8.0): **MISSED by 0.50 F1**"
    )
    assert target in text
    assert "train_5pct: `ner_vectors_elmo_acc`" not in text  # the target is at 1% only


def test_a_damaged_seed_record_is_named(tmp_path):
    (tmp_path / "seed0.json").write_text(json.dumps({"test": {"ents_f": 0.8}}), encoding="utf8")
    assert learning_curve.seed_test_scores(tmp_path, "ents_f") == [0.8]
    (tmp_path / "seed1.json").write_text('{"test": {"ents_f"', encoding="utf8")
    with pytest.raises(learning_curve.ProjectDataError, match=r"seed1\.json: not a valid JSON file"):
        learning_curve.seed_test_scores(tmp_path, "ents_f")


def test_a_chosen_baseline_on_an_existing_rows_config_reuses_that_rows_points(curve_calls):
    """NER's efficiency_both: its baseline is configs/ner_vectors.cfg, whose 1% and 5% points exist."""
    folder, calls = curve_calls
    configs = ["--config", "ner_vectors_acc=configs/ner_vectors.cfg"]
    configs += ["--config", "ner_vectors_elmo_acc=configs/search/ner_vectors_elmo_efficiency_both.cfg"]
    assert run_ner(folder, "--runs", "ner_vectors_acc,ner_vectors_elmo_acc", "--bilm-dir", "b", *configs).exit_code == 0
    same_as = [(args[2], args[-1]["same_as"]) for _, _, args in calls]
    assert same_as == [
        ("curve_ner_vectors_acc_1pct", "curve_ner_vectors_1pct"),
        ("curve_ner_vectors_elmo_acc_1pct", None),
        ("curve_ner_vectors_acc_5pct", "curve_ner_vectors_5pct"),
        ("curve_ner_vectors_elmo_acc_5pct", None),
    ]


def test_the_plot_ticks_the_actual_sizes_and_draws_no_error_bars_for_one_seed():
    """The demo's picture labelled 204 and 2,000 sentences as 2x10^2, 3x10^2, ... and showed error
    bars in its legend for one seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    figure, ax = plt.subplots()
    one_seed = {"ner_vectors": [(204, [60.0]), (2000, [71.3])], "ner_vectors_elmo": [(204, [66.0]), (2000, [75.0])]}
    learning_curve.plot_runs(ax, one_seed)
    figure.canvas.draw()
    assert [label.get_text() for label in ax.get_xticklabels()] == ["204", "2,000"]
    assert [label.get_text() for label in ax.get_xticklabels(minor=True) if label.get_text()] == []
    assert not any(isinstance(container, ErrorbarContainer) for container in ax.containers)
    figure, ax = plt.subplots()
    learning_curve.plot_runs(ax, {"ner_vectors": [(204, [60.0, 62.0]), (2000, [71.3, 71.5])]})
    assert any(isinstance(container, ErrorbarContainer) for container in ax.containers)  # seeds: their spread
    plt.close("all")
    assert learning_curve.seeds_heading({"ner": one_seed}) == "one seed"
    assert learning_curve.seeds_heading({"ner": {"ner_vectors": [(204, [60.0, 62.0])]}}) == "mean ± sd over seeds"


def test_run_passes_its_threads_to_every_seed(curve_calls):
    folder, calls = curve_calls
    result = run_ner(folder, "--runs", "ner_vectors", "--threads", "1")
    assert result.exit_code == 0, result.output
    assert calls and all(args[-1]["threads"] == 1 for _, _, args in calls)
