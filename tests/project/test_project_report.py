"""report: the investigations section, from records shaped like experiment's; the JSONL readers."""

import json
import shutil
from pathlib import Path

import pytest
import srsly
from experiment import training_summary
from project_errors import ProjectDataError
from report_runs import load_runs
from report_tables import investigation_lines, load_speeds, markdown, pretrain_section
from search_table import adaptation_lines, search_lines

from spacy_elmo.errors import ElmoOptionsError

from .conftest import REPO

BILM = ["--paths.elmo_options", "training/bilm/options.json", "--paths.elmo_weights", "training/bilm/weights.hdf5"]


def record(seed, dev, config="configs/textcat_elmo.cfg", overrides=(), test=None):
    return {
        "seed": seed,
        "config": config,
        "overrides": list(overrides),
        "test": test,
        "training": {"best_dev_score": dev, "epochs": 10, "seconds": 120.0, "wall_seconds": 30.0},
    }


def test_investigations_are_compared_with_the_scored_runs_on_the_same_seeds():
    investigations = {
        "sentiment_elmo_layer_norm": [
            record(0, 0.4349, overrides=BILM + ["--components.textcat.model.tok2vec.elmo.layer_norm", "true"])
        ]
    }
    scored = {
        "sentiment_elmo": [record(0, 0.4220, test={}), record(1, 0.4300, test={})],
        "sentiment_cnn": [record(1, 0.4400, config="configs/textcat_cnn.cfg", test={})],
    }
    lines = investigation_lines(investigations, None, scored)
    reference = next(line for line in lines if line.startswith("Best dev of the scored runs"))
    # seed 0 only: sentiment_elmo's seed 1 and the seed-1-only CNN run are left out
    assert "(0)" in reference and "`sentiment_elmo` 42.20" in reference and "sentiment_cnn" not in reference
    row = next(line for line in lines if "sentiment_elmo_layer_norm" in line)
    assert row.startswith(
        "| `sentiment_elmo_layer_norm` | `textcat_elmo.cfg` | "
        "`--components.textcat.model.tok2vec.elmo.layer_norm true` | 43.49 | 10 | 2.0 | 1 |"
    )


def test_no_investigations_no_section():
    assert investigation_lines({}, None, {"sentiment_elmo": [record(0, 0.4, test={})]}) == []


def test_the_jsonl_readers_drop_a_last_line_cut_by_a_kill(tmp_path):
    """spacy train's log (experiment) and pretrain's metrics (report) are appended as
    training runs: a kill mid-line leaves a cut last line, which the readers drop."""
    entry = {"epoch": 1, "step": 2, "seconds": 3.0, "words": 40, "score": 0.5, "scores": {"ents_f": 0.5}}
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(entry) + "\n" + json.dumps({**entry, "step": 4})[:30], encoding="utf8")
    summary = training_summary(log)
    assert (summary["steps"], summary["dev_curve"]) == (2, [(2, 0.5)])
    bilm_dir = tmp_path / "bilm"
    bilm_dir.mkdir()
    step = {"step": 20, "loss": 5.0, "elapsed": 120.0, "tokens": 1000}
    (bilm_dir / "metrics.jsonl").write_text(json.dumps(step) + '\n{"step": 40, "lo', encoding="utf8")
    lines, records = pretrain_section(bilm_dir)
    assert records == [step] and "- trained for 20 steps, 2.0 minutes (`pretrain`'s metrics.jsonl)" in lines


def test_the_biLM_section_reads_its_sizes_through_the_options_schema(tmp_path):
    bilm_dir = tmp_path / "bilm"
    bilm_dir.mkdir()
    shutil.copy(REPO / "tests" / "data" / "bilm_tf_reference" / "options.json", bilm_dir / "options.json")
    lines, _ = pretrain_section(bilm_dir)
    assert lines[0] == "- biLM: char CNN 124 filters, 2 highway, projection 16, LSTM 64, 2 layers (output 2P = 32)"
    (bilm_dir / "options.json").write_text('{"lstm": {"dim": 64}}', encoding="utf8")
    with pytest.raises(ElmoOptionsError, match="missing section 'char_cnn'"):
        pretrain_section(bilm_dir)


def test_a_warm_started_biLM_counts_the_tokens_of_every_stretch(tmp_path):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "provenance.json").write_text(json.dumps({"tokens_seen_total": 3000, "training_seconds_total": 7200.0}))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    total = {"train_words": 15000, "train_sentences": 700, "dev_words": 80}
    (corpus / "report.json").write_text(json.dumps({"total": total}))
    bilm_dir = tmp_path / "bilm"
    bilm_dir.mkdir()
    (bilm_dir / "config.cfg").write_text(f'[paths]\ninit_dir = "{earlier}"\ntrain = "{corpus / "train.txt"}"\n')
    (bilm_dir / "metrics.jsonl").write_text(
        json.dumps({"step": 20, "loss": 5.0, "elapsed": 1800.0, "tokens": 1000}) + "\n"
    )
    lines, _ = pretrain_section(bilm_dir)
    assert (
        "- warm-started from a biLM that had seen 3,000 tokens in 2.0 hours: 4,000 tokens seen in all, 2.5 hours"
        in lines
    )
    assert "- pretraining text: 15,000 words (700 sentences), held out: 80 words" in lines


def test_the_probe_table_comes_into_results_md_under_its_own_heading(tmp_path):
    import probe
    from report_tables import other_sections

    results = {"POS accuracy (Brown)": {"biLM: layer 0 (char CNN)": 0.9}}
    probed = "The biLM probed: `bilm`: 0.1M parameters, 2P = 16."
    probe.write_outputs(tmp_path / "probe", results, {"POS accuracy (Brown)": 10}, tmp_path / "bilm", probed)
    section = other_sections(tmp_path).splitlines()
    heading = section.index("## " + probe.PROBE_HEADING[2:])
    assert section[heading + 2 : heading + 7] == [
        probed,
        "",
        "| representation | POS accuracy (Brown) |",
        "|---|---|",
        "| biLM: layer 0 (char CNN) | 90.0 |",
    ]


def search_record(dev, accuracy=None, seconds=600.0):
    scores = {"cats_micro_f": accuracy} if accuracy is not None else {"ents_f": dev}
    return {
        "seed": 0,
        "config": "configs/search/x.cfg",
        "overrides": [],
        "test": None,
        "training": {"best_dev_score": dev, "best_dev_scores": scores, "epochs": 5, "seconds": seconds},
    }


def test_the_search_table_pairs_each_candidate_with_its_own_baseline():
    investigations = {
        "search_ner_vectors_bilstm": [search_record(0.9050)],
        "search_ner_vectors_elmo_bilstm": [search_record(0.9231, seconds=1200.0)],
        "search_ner_vectors_elmo_bilstm_both": [search_record(0.9240)],
        "search_sentiment_vectors_elmo_attn": [search_record(0.4612, accuracy=0.5301)],
        "sentiment_elmo_layer_norm": [search_record(0.43, accuracy=0.5)],
    }
    scored = {
        "ner_vectors": [record(0, 0.8999, test={})],
        "ner_vectors_elmo": [record(0, 0.9128, test={}), record(1, 0.95, test={})],
    }
    lines = search_lines(investigations, scored)
    rows = [line for line in lines if line.startswith("| ner") or line.startswith("| sentiment")]
    assert rows[0].startswith("| ner | `efficiency`") and "| 89.99 | 91.28 | +1.29 | 2 / 2 |" in rows[0]
    assert "| 90.50 | 92.31 | +1.81 | 10 / 20 |" in rows[1] and "`bilstm`" in rows[1]
    # "both" pairs with the plain candidate's baseline
    assert "`bilstm_both`" in rows[2] and "| 90.50 | 92.40 | +1.90 |" in rows[2]
    # a pair whose baseline has not run yet: shown, no gain; sentiment shows macro F1 / accuracy
    assert "| (not run) | 46.12 / 53.01 | - | - / 10 |" in rows[3]
    assert len(rows) == 4  # the layer-norm investigation is not a search run
    assert "- ner: highest dev with ELMo so far: `bilstm_both` (92.40; ELMo candidates run: 3)" in lines
    assert any(line.startswith("The choice per task") and "highest dev selection score" in line for line in lines)


def test_the_report_lists_search_runs_in_their_table_only():
    investigations = {
        "search_ner_vectors_elmo_bilstm": [search_record(0.9231)],
        "sentiment_elmo_layer_norm": [record(0, 0.4349)],
    }
    text = markdown({}, {}, [], "t", investigations)
    search, others = text.split("## Investigations")
    assert "search_ner_vectors_elmo_bilstm" not in others and "`bilstm`" in search
    assert "sentiment_elmo_layer_norm" in others


def test_no_search_runs_no_search_table():
    assert search_lines({"sentiment_elmo_layer_norm": [record(0, 0.4)]}, {}) == []


def test_the_search_re_run_of_the_efficiency_pair_wins_over_the_scored_seed():
    investigations = {
        "search_ner_vectors": [search_record(0.9001)],
        "search_ner_vectors_elmo": [search_record(0.9140)],
    }
    scored = {"ner_vectors": [record(0, 0.8999, test={})]}
    rows = [line for line in search_lines(investigations, scored) if line.startswith("| ner")]
    # one efficiency pair, from the search runs; no bogus "elmo" candidate
    assert len(rows) == 1 and "`efficiency`" in rows[0] and "| 90.01 | 91.40 | +1.39 |" in rows[0]


def test_the_adaptation_section_compares_the_general_and_the_adapted_biLM(tmp_path):
    for task, before, after in (("ner", 180.04, 95.5), ("sentiment", 240.0, 150.25)):
        folder = tmp_path / f"bilm_adapted_{task}"
        folder.mkdir()
        (folder / "perplexity_before.json").write_text(json.dumps({"mean": before}), encoding="utf8")
        (folder / "perplexity_after.json").write_text(json.dumps({"mean": after}), encoding="utf8")
    investigations = {
        "search_ner_vectors_elmo_bilstm": [search_record(0.9231)],
        "search_ner_vectors_elmo_bilstm_adapted": [search_record(0.9262)],
        "search_sentiment_vectors_elmo_reduce": [search_record(0.4569, accuracy=0.5292)],
        "search_sentiment_vectors_elmo_reduce_adapted": [search_record(0.4501, accuracy=0.5311)],
    }
    lines = adaptation_lines(investigations, {}, tmp_path)
    assert "| ner | 180.0 -> 95.5 | `bilstm` | 92.31 | 92.62 | +0.31 |" in lines
    assert "| sentiment | 240.0 -> 150.2 | `reduce` | 45.69 / 52.92 | 45.01 / 53.11 | -0.68 |" in lines
    assert "- ner, `bilstm`: +0.31 on dev with the adapted biLM: keep the adapted biLM" in lines
    assert "- sentiment, `reduce`: -0.68 on dev with the adapted biLM: keep the general biLM" in lines
    # the adapted runs are not search candidates of their own
    rows = [line for line in search_lines(investigations, {}) if line.startswith("| ")]
    assert not any("adapted" in row for row in rows)


def test_an_adapted_run_of_the_efficiency_choice_is_compared_with_the_scored_seed():
    investigations = {"search_ner_vectors_elmo_efficiency_adapted": [search_record(0.9150)]}
    scored = {"ner_vectors_elmo": [record(0, 0.9128, test={})]}
    lines = adaptation_lines(investigations, scored, None)
    assert "| ner | - | `efficiency` | 91.28 | 91.50 | +0.22 |" in lines


def test_perplexities_without_adapted_runs_still_show_and_nothing_means_no_section(tmp_path):
    assert adaptation_lines({}, {}, tmp_path) == [] and adaptation_lines({}, {}, None) == []
    folder = tmp_path / "bilm_adapted_ner"
    folder.mkdir()
    for when, value in (("before", 200.0), ("after", 120.0)):
        (folder / f"perplexity_{when}.json").write_text(json.dumps({"mean": value}), encoding="utf8")
    assert "| ner | 200.0 -> 120.0 | `-` | - | - | - |" in adaptation_lines({}, {}, tmp_path)


def scored(seed, score, dev, config, task="ner"):
    """A scored seed as experiment writes it: test scores (NER or sentiment) and the training summary."""
    if task == "ner":
        test = {"ents_f": score, "ents_p": score, "ents_r": score, "ents_per_type": {}}
    else:
        test = {"cats_micro_f": score, "cats_macro_f": score - 0.05, "cats_f_per_type": {}}
    training = {"best_dev_score": dev, "epochs": 4, "steps": 800, "seconds": 600.0, "wall_seconds": 610.0}
    return {"name": "x", "seed": seed, "config": config, "overrides": [], "test": test, "training": training}


def three_seeds(mean, dev, config, task="ner"):
    """Three seeds whose test scores average to MEAN, one point apart (mean - 0.01, mean, mean + 0.01)."""
    return [scored(seed, mean + (seed - 1) / 100, dev, config, task) for seed in range(3)]


def target(lines, start):
    return next(line for line in lines if line.startswith(start))


def test_the_level_target_says_by_how_much_it_is_missed_and_the_stretch():
    import report_runs

    lines = {}
    for f1 in (0.8840, 0.8950, 0.9020):
        runs = {
            "ner_vectors_acc": three_seeds(0.8600, 0.88, "configs/search/ner_vectors_bilstm.cfg"),
            "ner_vectors_elmo_acc": three_seeds(f1, 0.90, "configs/search/ner_vectors_elmo_bilstm.cfg"),
        }
        lines[f1] = report_runs.target_lines(report_runs.summarize(runs))
    level = "- `ner_vectors_elmo_acc` (F1, test): "
    assert target(lines[0.8840], level) == (
        level + "88.40; target: at least 89.00 (stretch: 90.15, the paper's baseline): "
        "**MISSED** by 0.60 points (stretch missed by 1.75)"
    )
    assert target(lines[0.8950], level).endswith(": **met** (stretch missed by 0.65)")
    assert target(lines[0.9020], level).endswith(": **met** (stretch met too)")
    margin = "- `ner_vectors_elmo_acc` vs `ner_vectors_acc` (F1, test): "
    assert target(lines[0.8840], margin) == margin + "+2.40 points; target: better by at least 2.0 points: **met**"
    assert target(lines[0.8950], margin).endswith("+3.50 points; target: better by at least 2.0 points: **met**")


def test_a_missed_margin_says_by_how_much_and_a_tie_is_no_gain():
    import report_runs

    runs = {
        "ner_cnn": three_seeds(0.8000, 0.82, "configs/ner_cnn.cfg"),
        "ner_vectors": three_seeds(0.8100, 0.83, "configs/ner_vectors.cfg"),
        "ner_elmo": three_seeds(0.8100, 0.83, "configs/ner_elmo.cfg"),
    }
    lines = report_runs.target_lines(report_runs.summarize(runs))
    assert "- `ner_elmo` vs `ner_cnn` (F1, test): +1.00 points; target: better by at least 2.0 points: " in lines[0]
    assert lines[0].endswith("**MISSED** by 1.00 points")
    assert lines[1].endswith("+0.00 points; target: better at all: **MISSED** by 0.00 points")


def sentiment_runs(**tests_and_devs):
    configs = {
        "sentiment_vectors_acc": "configs/search/textcat_vectors_reduce.cfg",
        "sentiment_vectors_elmo_acc": "configs/search/textcat_vectors_elmo_reduce.cfg",
    }
    return {
        name: three_seeds(test, dev, configs.get(name, f"configs/{name}.cfg"), "sentiment")
        for name, (test, dev) in tests_and_devs.items()
    }


def test_the_best_elmo_run_by_dev_must_beat_every_baseline_bag_of_words_included():
    import report_runs

    runs = sentiment_runs(
        sentiment_bow=(0.5150, 0.44),
        sentiment_cnn=(0.4900, 0.43),
        sentiment_vectors=(0.5000, 0.44),
        sentiment_vectors_acc=(0.5200, 0.45),
        # the highest test accuracy with ELMo, but not the best on dev: the test split picks nothing
        sentiment_elmo=(0.5500, 0.42),
        sentiment_vectors_elmo=(0.5160, 0.45),
        sentiment_vectors_elmo_acc=(0.5310, 0.47),
    )
    line = target(report_runs.target_lines(report_runs.summarize(runs)), "- best sentiment run with ELMo")
    assert line == (
        "- best sentiment run with ELMo (highest mean dev of 3): `sentiment_vectors_elmo_acc` (test accuracy 53.10) "
        "vs every baseline: `sentiment_bow` +1.60, `sentiment_cnn` +4.10, `sentiment_vectors` +3.10, "
        "`sentiment_vectors_acc` +1.10; target: better than each by at least 2.0 points: "
        "**MISSED** by 0.90 points (the strongest: `sentiment_vectors_acc`)"
    )
    runs = sentiment_runs(sentiment_bow=(0.5150, 0.44), sentiment_vectors_elmo_acc=(0.5400, 0.47))
    line = target(report_runs.target_lines(report_runs.summarize(runs)), "- best sentiment run with ELMo")
    assert line.endswith(
        "`sentiment_bow` +2.50; target: better than each by at least 2.0 points: **met** "
        "(the strongest: `sentiment_bow`)"
    )
    # no baseline yet (or no ELMo run): no line
    runs = sentiment_runs(sentiment_vectors_elmo_acc=(0.5400, 0.47))
    assert not [line for line in report_runs.target_lines(report_runs.summarize(runs)) if line.startswith("- best")]


def test_the_chosen_runs_name_their_candidate_in_the_table():
    import report_runs

    runs = {
        "ner_vectors": three_seeds(0.8400, 0.86, "configs/ner_vectors.cfg"),
        "ner_vectors_elmo_acc": three_seeds(0.8900, 0.91, "configs/search/ner_vectors_elmo_bilstm_both.cfg"),
    }
    text = markdown(report_runs.summarize(runs), runs, [], "t")
    row = next(line for line in text.splitlines() if line.startswith("| `ner_vectors_elmo_acc`"))
    assert row.startswith(
        "| `ner_vectors_elmo_acc` | chosen task model (dev search) + static vectors + ELMo (the paper's setup): "
        "`bilstm_both`, biLSTM encoder, ELMo at its input and output | 89.00 ± 1.00 |"
    )
    row = next(line for line in text.splitlines() if line.startswith("| `ner_vectors`"))
    assert "| CNN tok2vec + en_core_web_md static vectors | 84.00 ± 1.00 |" in row
    # today's pair chosen: the chosen rows say so; today's own rows stay as they are
    runs["ner_vectors_acc"] = three_seeds(0.8400, 0.86, "configs/ner_vectors.cfg")
    text = markdown(report_runs.summarize(runs), runs, [], "t")
    row = next(line for line in text.splitlines() if line.startswith("| `ner_vectors_acc`"))
    assert "static vectors: `efficiency`, today's efficiency tok2vec (width 96, depth 4), today's head |" in row
    row = next(line for line in text.splitlines() if line.startswith("| `ner_vectors`"))
    assert "| CNN tok2vec + en_core_web_md static vectors | 84.00 ± 1.00 |" in row


def test_a_run_whose_seeds_trained_different_configs_is_refused():
    import pytest
    import report_runs
    from project_errors import ProjectDataError

    seeds = three_seeds(0.89, 0.91, "configs/search/ner_vectors_elmo_bilstm.cfg")
    seeds[2]["config"] = "configs/search/ner_vectors_elmo_acc.cfg"  # the choice changed after two seeds
    with pytest.raises(ProjectDataError, match="ner_vectors_elmo_acc: its seeds trained different configs") as error:
        report_runs.summarize({"ner_vectors_elmo_acc": seeds})
    assert (
        "configs/search/ner_vectors_elmo_bilstm.cfg: seeds 0, 1; configs/search/ner_vectors_elmo_acc.cfg: seeds 2"
        in str(error.value)
    )


def test_a_damaged_json_record_is_named(tmp_path):
    """The report's JSON inputs (run records, speed records, perplexities) name a damaged file."""
    (tmp_path / "ner_cnn").mkdir()
    (tmp_path / "ner_cnn" / "seed0.json").write_text('{"seed": 0, "test"', encoding="utf8")
    with pytest.raises(ProjectDataError, match=r"seed0\.json: not a valid JSON file"):
        load_runs(tmp_path)
    (tmp_path / "speed_ner.json").write_bytes(b"\xff\xfe")
    with pytest.raises(ProjectDataError, match=r"speed_ner\.json: not a valid JSON file"):
        load_speeds(tmp_path)
    folder = tmp_path / "bilm_adapted_ner"
    folder.mkdir()
    (folder / "perplexity_before.json").write_text("", encoding="utf8")
    with pytest.raises(ProjectDataError, match=r"perplexity_before\.json: not a valid JSON file"):
        adaptation_lines({}, {}, tmp_path)


def _table_rows(lines, header_start):
    """The cells of a markdown table's body rows, the table found by its header's start."""
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _candidate(cell):
    return "efficiency" if cell.startswith("today's efficiency pair") else cell.split("`")[1]


def test_the_docs_dev_table_says_what_the_committed_search_records_say():
    """docs/results.md's "Dev scores" table is written by hand from the search's records;
    every score and gain in it must be the report's, from reports/search and reports/runs, and
    its bold rows (each task's highest ELMo dev) the choices in project.yml's vars."""
    report = search_lines(load_runs(REPO / "reports" / "search", dev_only=True), load_runs(REPO / "reports" / "runs"))
    by_candidate = {
        (row[0], _candidate(row[1])): row for row in _table_rows(report, "| task | candidate | vectors: dev")
    }
    docs = (REPO / "docs" / "results.md").read_text(encoding="utf-8").splitlines()
    documented = _table_rows(docs, "| task | candidate | vectors: dev")
    assert len(documented) == len(by_candidate), "a search record without its docs row, or the reverse"
    report_text = "\n".join(report)
    for task, candidate_cell, vectors, with_elmo, gain in documented:
        candidate = _candidate(candidate_cell)
        row = by_candidate[(task.lower(), candidate)]
        assert vectors == ("(queued)" if row[2] == "(not run)" else row[2]), (task, candidate_cell)
        assert with_elmo.replace("**", "") == row[3], (task, candidate_cell)
        assert gain.split(" ")[0] == row[4], (task, candidate_cell)
        if with_elmo.startswith("**"):  # bold: the task's highest ELMo dev, the report's choice
            assert f"- {task.lower()}: highest dev with ELMo so far: `{candidate}`" in report_text
    bold = {row[0].lower(): _candidate(row[1]) for row in documented if row[3].startswith("**")}
    assert len(bold) == 2 and sum(row[3].startswith("**") for row in documented) == 2, "one bold row per task"
    variables = srsly.read_yaml(REPO / "project.yml")["vars"]
    assert bold == {"ner": variables["ner_search_choice"], "sentiment": variables["sentiment_search_choice"]}


def one_seed_runs(tmp_path):
    """A demo-like metrics folder: one seed each of a NER and a sentiment pair, with and without ELMo."""
    metrics = tmp_path / "metrics"
    for name, score, task in (
        ("ner_cnn", 0.64, "ner"),
        ("ner_elmo", 0.66, "ner"),
        ("sentiment_cnn", 0.34, "sentiment"),
        ("sentiment_elmo", 0.33, "sentiment"),
    ):
        (metrics / name).mkdir(parents=True)
        record = scored(0, score, 0.5, f"configs/{name.replace('sentiment', 'textcat')}.cfg", task)
        srsly.write_json(metrics / name / "seed0.json", record)
    return metrics


def test_a_reduced_runs_report_judges_no_target_and_says_what_its_figures_mean(tmp_path):
    """The demo (one seed, reduced data and budget) printed MISSED for 8 of 9 targets."""
    import report_runs

    summary = report_runs.summarize(load_runs(one_seed_runs(tmp_path)))
    full = markdown(summary, {}, [], "t")
    assert "**MISSED** by" in full  # the same figures judged, as the full run's report does
    reduced = markdown(summary, {}, [], "t", reduced=True)
    assert "MISSED" not in reduced and "**met**" not in reduced
    assert (
        "`ner_elmo` vs `ner_cnn` (F1, test): +2.00 points; target: better by at least 2.0 points: not judged" in reduced
    )
    assert "one seed of a reduced run" in reduced and "docs/results.md" in reduced


def test_the_sentiment_table_names_its_best_dev_metric(tmp_path):
    import report_runs
    import report_tables

    lines = report_tables.sentiment_table_lines(report_runs.summarize(load_runs(one_seed_runs(tmp_path))), None)
    header = next(line for line in lines if line.startswith("| config"))
    assert "| best dev macro F1 |" in header  # spaCy's cats_score: macro F1 for exclusive classes


def test_results_md_shows_every_picture_the_report_makes(tmp_path):
    from report import main

    from .conftest import run_cli

    metrics = one_seed_runs(tmp_path)
    result = run_cli(main, [metrics, tmp_path / "reports"])
    assert result.exit_code == 0, result.output
    pictures = sorted(p.name for p in (tmp_path / "reports").glob("*.png"))
    assert pictures == ["scores.png"]
    results = (tmp_path / "reports" / "results.md").read_text(encoding="utf8")
    assert [name for name in pictures if f"![{name}]({name})" in results] == pictures


def test_the_score_bars_show_their_values_on_an_axis_where_a_small_gap_shows(tmp_path):
    """On a 0-100 axis the demo's 0.2 to 4 point gaps vanished, and no bar said its score."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import report_plots
    import report_runs
    from matplotlib.container import ErrorbarContainer

    summary = report_runs.summarize(load_runs(one_seed_runs(tmp_path)))  # NER: 64 and 66
    fig, ax = plt.subplots()
    report_plots.score_bars(ax, summary, report_runs.NER_RUNS, "f1", "F1")
    low, high = ax.get_ylim()
    assert 50 <= low < 64 and 66 < high <= 70  # a 2-point gap is a sixth of the axis or more
    assert (66 - 64) / (high - low) >= 1 / 6
    assert sorted(text.get_text() for text in ax.texts) == ["64.00", "66.00"]  # each bar's score on it
    assert ax.get_ylabel() == f"F1 (axis from {low:g})"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["without ELMo", "with ELMo"]
    assert not any(isinstance(container, ErrorbarContainer) for container in ax.containers)
    three = report_runs.summarize({"ner_cnn": three_seeds(0.8, 0.82, "configs/ner_cnn.cfg")})
    fig, ax = plt.subplots()
    report_plots.score_bars(ax, three, report_runs.NER_RUNS, "f1", "F1")
    assert any(isinstance(container, ErrorbarContainer) for container in ax.containers)  # seeds: their spread
    assert ax.get_ylim()[1] >= 81  # room above the error bar
    plt.close("all")


def test_the_table_note_says_one_seed_where_every_run_has_one(tmp_path):
    """ "Mean ± sample standard deviation over seeds" was printed under tables of one seed."""
    import report_runs
    import report_tables

    one = report_runs.summarize(load_runs(one_seed_runs(tmp_path)))
    assert report_tables.seeds_note(one).startswith("One seed per run")
    assert "over seeds" not in markdown(one, {}, [], "t", reduced=True)
    three = report_runs.summarize({"ner_cnn": three_seeds(0.8, 0.82, "configs/ner_cnn.cfg")})
    assert report_tables.seeds_note(three) == "Mean ± sample standard deviation over seeds."


def test_a_task_without_runs_gets_no_empty_table_or_panel(tmp_path):
    """The demo (NER only) showed an empty sentiment table and an empty sentiment panel."""
    import report_plots
    import report_runs
    import report_tables

    summary = report_runs.summarize(
        {name: records for name, records in load_runs(one_seed_runs(tmp_path)).items() if name.startswith("ner")}
    )
    assert report_tables.sentiment_table_lines(summary, None) == []
    written = report_plots.plots(summary, {}, None, tmp_path)
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(written[0]).shape
    assert width < 1.5 * height  # one panel, not two


def with_speed(records, words_per_second):
    """The records with `spacy evaluate`'s speed in their test scores, as experiment keeps them."""
    for record in records:
        record["test"]["speed"] = words_per_second
    return records


def test_without_a_speed_record_each_score_shows_its_words_per_second_from_evaluate():
    """The demo report showed ELMo's F1 gain but not its price (791 words/s against 6,999)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import report_plots
    import report_runs

    runs = {
        "ner_vectors": with_speed([scored(0, 0.72, 0.7, "configs/ner_vectors.cfg")], 6999.4),
        "ner_vectors_elmo": with_speed([scored(0, 0.77, 0.75, "configs/ner_vectors_elmo.cfg")], 791.2),
    }
    summary = report_runs.summarize(runs)
    rows = [line for line in markdown(summary, runs, [], "t").splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| config | token representation | test F1 | words/s | P |")
    assert rows[1].startswith("| `ner_vectors` | ") and "| 72.00 | 6,999 | 72.00 |" in rows[1]
    assert "| 77.00 | 791 | 77.00 |" in rows[2]
    assert "words/s: what `spacy evaluate` measured" in markdown(summary, runs, [], "t")
    fig, ax = plt.subplots()
    report_plots.score_bars(ax, summary, report_runs.NER_RUNS, "f1", "F1", report_runs.words_per_second(summary))
    assert sorted(text.get_text() for text in ax.texts) == ["72.00\n6,999 words/s", "77.00\n791 words/s"]
    plt.close("all")


def test_a_reduced_runs_headings_do_not_call_its_slice_the_whole_test_split(tmp_path):
    """The demo's heading said "test = testb" over a 2,000-sentence slice."""
    import report_runs

    summary = report_runs.summarize(load_runs(one_seed_runs(tmp_path)))
    assert "test = testb" in markdown(summary, {}, [], "t")
    reduced = markdown(summary, {}, [], "t", reduced=True)
    assert "test = testb" not in reduced and "## NER: CoNLL-2003 English (a slice of testb" in reduced
    assert "(a slice of the test split of the seeded 80/10/10 split)" in reduced


def test_a_curve_ending_above_its_lowest_dev_perplexity_says_which_weights_are_kept(tmp_path):
    """The demo's curve ended at 365 above its best 338 with no word on which biLM was kept."""
    bilm_dir = tmp_path / "bilm"
    bilm_dir.mkdir()
    records = [{"step": 400, "loss": 5.0, "elapsed": 60.0}]
    records += [{"step": step, "dev_perplexity": ppl} for step, ppl in ((200, 400.0), (300, 338.0), (400, 365.0))]
    (bilm_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lines, _ = pretrain_section(bilm_dir)
    assert "- dev perplexity at the end: 365.0; the lowest was 338.0 at step 300: the biLM kept is the last" in next(
        line for line in lines if line.startswith("- dev perplexity")
    )
    (bilm_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:3]))
    assert "- dev perplexity at the end: 338.0" in pretrain_section(bilm_dir)[0]  # its lowest: nothing to say


def test_the_biLM_section_says_when_the_scores_read_another_biLM(tmp_path):
    """The demo's tasks read the bundled biLM while its biLM section shows the small demo biLM."""
    import report_runs

    bundled = ["--paths.elmo_options", "bundled/options.json", "--paths.elmo_weights", "bundled/weights.hdf5"]
    runs = {"ner_vectors_elmo": [scored(0, 0.77, 0.75, "configs/ner_vectors_elmo.cfg")]}
    runs["ner_vectors_elmo"][0]["overrides"] = bundled
    summary = report_runs.summarize(runs)
    text = markdown(summary, runs, [], "t", bilm_dir=tmp_path / "demo_bilm")
    assert "The scores above read the biLM in `bundled` (the ELMo runs' `--paths.elmo_weights`)" in text
    assert "The scores above read" not in markdown(summary, runs, [], "t", bilm_dir=Path("bundled"))
