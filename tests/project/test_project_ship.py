"""ship: a pretrained biLM as float16 files (size-capped); install_default: those files into the package."""

import json
import shutil
from pathlib import Path

import bilm_history
import h5py
import numpy
import pytest
import ship as ship_module
from confection import Config
from install_default import install
from project_errors import ProjectDataError
from ship import BILM_FILES, HEAD_FILES, MAX_MB, SHIPPED_FILES, held_out_curve, megabytes, ship, steps_by_precision

from spacy_elmo.bilm import ElmoBiLM
from spacy_elmo.files.hashing import file_sha256
from spacy_elmo.pretrain import load_config, pretrain

from .conftest import run_cli

TINY = Path(__file__).parent.parent.parent / "configs" / "pretrain_tiny.cfg"


@pytest.fixture(scope="module")
def bilm_dir(tmp_path_factory) -> Path:
    """A `pretrain` output: 3 steps of the tiny config."""
    folder = tmp_path_factory.mktemp("pretrained")
    text = folder / "text.txt"
    text.write_text("the cat sat on the mat .\na dog ran home .\n" * 20, encoding="utf8")
    pretrain(load_config(TINY, {"paths.train": str(text), "training.max_steps": 3}), folder / "bilm", progress=False)
    return folder / "bilm"


def test_ship_writes_float16_weights_with_provenance(bilm_dir, tmp_path):
    dest = ship(bilm_dir, tmp_path / "default_bilm")
    assert sorted(p.name for p in dest.iterdir()) == sorted(SHIPPED_FILES)
    with h5py.File(dest / "weights.hdf5", "r") as f:
        assert f["CNN_proj/W_proj"].dtype == numpy.float16
    provenance = json.loads((dest / "provenance.json").read_text())
    assert provenance["steps"] == 3 and "[training]" in provenance["config"]
    assert provenance["steps_by_precision"] == {"fp32": 3}
    original = ElmoBiLM.from_dir(bilm_dir).embed_batch([["the", "cat"]])[0]
    shipped = ElmoBiLM.from_dir(dest).embed_batch([["the", "cat"]])[0]
    assert numpy.allclose(original, shipped, atol=2e-2) and not numpy.array_equal(original, shipped)
    with pytest.raises(ProjectDataError, match="over the 0.0001 MB limit"):
        ship(bilm_dir, tmp_path / "too_big", max_mb=0.0001)
    assert not (tmp_path / "too_big").exists()


def test_install_copies_the_shipped_files_and_refuses_an_incomplete_folder(bilm_dir, tmp_path):
    shipped = ship(bilm_dir, tmp_path / "default_bilm")
    package_dir = tmp_path / "package" / "default_bilm"
    package_dir.mkdir(parents=True)
    (package_dir / "stale.txt").write_text("from an older biLM")
    assert install(shipped, package_dir) == package_dir
    assert sorted(p.name for p in package_dir.iterdir()) == sorted(SHIPPED_FILES)
    assert all((package_dir / name).read_bytes() == (shipped / name).read_bytes() for name in SHIPPED_FILES)
    incomplete = tmp_path / "incomplete"
    shutil.copytree(shipped, incomplete)
    (incomplete / "provenance.json").unlink()
    with pytest.raises(ProjectDataError, match=f"{incomplete}: no provenance.json"):
        install(incomplete, tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_a_shipped_biLM_can_be_warm_started_and_its_provenance_counts_every_token(bilm_dir, tmp_path):
    """The shipped softmax (float16) and vocab continue training; tokens add up over warm starts."""
    first = ship(bilm_dir, tmp_path / "first")
    with h5py.File(first / "softmax.hdf5", "r") as f:
        assert all(f[name].dtype == numpy.float16 for name in f.keys())
    seen = json.loads((first / "provenance.json").read_text())["tokens_seen"]
    text = bilm_dir.parent / "text.txt"
    pretrain(
        load_config(
            TINY,
            {"paths.train": str(text), "paths.dev": str(text), "training.max_steps": 2, "paths.init_dir": str(first)},
        ),
        tmp_path / "continued",
        progress=False,
    )
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"total": {"train_words": 280}}))
    second = json.loads(
        (ship(tmp_path / "continued", tmp_path / "second", corpus_report=report) / "provenance.json").read_text()
    )
    assert second["steps"] == 2 and second["warm_started_from"]["tokens_seen"] == seen
    assert second["tokens_seen_total"] == second["tokens_seen"] + seen > seen
    assert second["corpus"] == {"train_words": 280}
    # The continued stretch's held-out evaluations, counted in tokens over both stretches.
    assert second["held_out_sha256"] == file_sha256(text)
    assert second["held_out_curve"][0]["step"] == 0
    assert second["held_out_curve"][0]["tokens_seen_total"] == seen
    assert second["held_out_curve"][-1]["tokens_seen_total"] == second["tokens_seen_total"]
    result = run_cli(bilm_history.main, [tmp_path / "second" / "provenance.json", tmp_path / "reports"])
    assert result.exit_code == 0, result.output
    rows = [
        line for line in (tmp_path / "reports" / "bilm_history.md").read_text().splitlines() if line.startswith("| ")
    ]
    assert len(rows) == 3  # the header and one row per stretch
    assert "from zero" in rows[1] and f"| {seen:,} | {seen:,} |" in rows[1]
    assert "warm start" in rows[2] and f"| {second['tokens_seen_total']:,} |" in rows[2]
    assert (tmp_path / "reports" / "bilm_history.png").read_bytes()[:4] == b"\x89PNG"


def test_held_out_curve_counts_tokens_at_each_evaluation_over_warm_starts():
    records = [
        {"step": 0, "dev_perplexity": 900.0},
        {"step": 20, "loss": 5.0, "tokens": 80},
        {"step": 40, "loss": 4.0, "tokens": 160},
        {"step": 40, "dev_perplexity": 300.0},
        {"step": 40, "loss": 4.1, "tokens": 161},  # logged again after a resume: the later record counts
        {"step": 50, "dev_loss": 2.5},
    ]  # a continuous-output run's score; no training record at step 50
    assert held_out_curve(records, earlier_tokens=1000) == [
        {"step": 0, "tokens_seen_total": 1000, "dev_perplexity": 900.0},
        {"step": 40, "tokens_seen_total": 1161, "dev_perplexity": 300.0},
        {"step": 50, "tokens_seen_total": 1161, "dev_loss": 2.5},
    ]


def test_steps_by_precision_counts_each_stretch_once():
    records = [
        {"step": 20, "loss": 5.0},  # logged before pretrain recorded the precision
        {"step": 40, "loss": 4.0, "precision": "fp32"},
        {"step": 40, "dev_perplexity": 300.0},
        {"step": 40, "loss": 4.1, "precision": "bf16"},  # logged again after a resume: counted once
        {"step": 70, "loss": 3.9, "precision": "bf16"},
        {"step": 75, "loss": 3.8, "precision": "fp32"},
    ]
    assert steps_by_precision(records) == {"not recorded": 20, "fp32": 25, "bf16": 30}


def test_the_lm_head_is_left_out_where_only_the_biLM_fits(bilm_dir, tmp_path):
    full = ship(bilm_dir, tmp_path / "full")
    bilm_mb = megabytes(full, ("options.json", "weights.hdf5"))
    head_mb = megabytes(full, HEAD_FILES)
    dest = ship(bilm_dir, tmp_path / "no_head", max_mb=bilm_mb + head_mb / 2)
    assert sorted(p.name for p in dest.iterdir()) == sorted(BILM_FILES)
    provenance = json.loads((dest / "provenance.json").read_text())
    assert provenance["lm_head"].startswith("left out") and provenance["size_mb"] == round(bilm_mb, 2)
    assert (dest / "weights.hdf5").read_bytes() == (full / "weights.hdf5").read_bytes()
    # The package folder follows: an older biLM's head does not stay behind.
    package_dir = install(full, tmp_path / "package")
    assert (package_dir / "softmax.hdf5").is_file()
    install(dest, package_dir)
    assert sorted(p.name for p in package_dir.iterdir()) == sorted(BILM_FILES)
    with pytest.raises(ProjectDataError, match="the float16 biLM takes .* over the"):
        ship(bilm_dir, tmp_path / "too_big", max_mb=bilm_mb / 2)
    half_head = tmp_path / "half_head"
    shutil.copytree(full, half_head)
    (half_head / "vocab.txt").unlink()
    with pytest.raises(ProjectDataError, match=f"{half_head}: no vocab.txt"):
        install(half_head, tmp_path / "other")


def test_a_biLM_of_the_bundled_size_ships_with_its_LM_head_under_the_default_cap(tmp_path):
    """The bundled biLM's own configuration (2P = 512, adaptive softmax over its vocabulary size)
    fits under ship's default cap with its vocabulary and float16 head, so the next one ships them."""
    from confection import Config

    from spacy_elmo.bilm.lm_head import build_lm_head
    from spacy_elmo.loaders import DEFAULT_BILM_DIR
    from spacy_elmo.pretrain.outputs import export_softmax
    from spacy_elmo.pretrain.vocab import SPECIAL_TOKENS

    bundled = json.loads((DEFAULT_BILM_DIR / "provenance.json").read_text())
    config = Config().from_str(bundled["config"], interpolate=False)
    training, vocab_size = config["training"], config["vocab"]["max_size"]
    bilm_dir = tmp_path / "pretrained"
    bilm_dir.mkdir()
    for name in ("options.json", "weights.hdf5"):
        shutil.copy(DEFAULT_BILM_DIR / name, bilm_dir / name)
    words = list(SPECIAL_TOKENS) + [f"word{i}" for i in range(vocab_size - len(SPECIAL_TOKENS))]
    (bilm_dir / "vocab.txt").write_text("".join(w + "\n" for w in words), encoding="utf8")
    head = build_lm_head(
        training["softmax"],
        config["model"]["projection_dim"],
        vocab_size,
        cutoffs=training["adaptive_cutoffs"],
        div_value=training["adaptive_div_value"],
    )
    export_softmax(head, bilm_dir / "softmax.hdf5")
    dest = ship(bilm_dir, tmp_path / "default_bilm")  # the default cap
    assert sorted(p.name for p in dest.iterdir()) == sorted(SHIPPED_FILES)
    provenance = json.loads((dest / "provenance.json").read_text())
    assert "lm_head" not in provenance
    assert 25 < provenance["size_mb"] <= MAX_MB == 32  # over the old 25 MB cap: the head needed the new one


def test_a_damaged_provenance_is_named_by_ship_and_bilm_history(bilm_dir, tmp_path):
    """A warm start's provenance.json cut short: ship names the file instead of a bare JSONDecodeError."""
    first = ship(bilm_dir, tmp_path / "first")
    provenance = first / "provenance.json"
    provenance.write_text(provenance.read_text()[:40], encoding="utf8")
    config_text = f'[paths]\ninit_dir = "{first}"\n'
    with pytest.raises(ProjectDataError, match=r"provenance\.json: not a valid JSON file"):
        ship_module.warm_start_provenance(config_text)
    result = run_cli(bilm_history.main, [provenance, tmp_path / "reports"])
    assert result.exit_code != 0
    assert isinstance(result.exception, ProjectDataError) and "not a valid JSON file" in str(result.exception)


def test_the_shipped_provenance_holds_no_absolute_path_of_the_training_machine(bilm_dir, tmp_path):
    """pretrain's config names its files by absolute path; provenance.json keeps them relative to the
    run's folder where they lie beside it, else named by their role (issue 74)."""
    first = ship(bilm_dir, tmp_path / "first")
    text = bilm_dir.parent / "text.txt"
    pretrain(
        load_config(TINY, {"paths.train": str(text), "training.max_steps": 1, "paths.init_dir": str(first)}),
        tmp_path / "continued",
        progress=False,
    )
    shipped = ship(tmp_path / "continued", tmp_path / "second") / "provenance.json"
    record = json.loads(shipped.read_text())
    paths = Config().from_str(record["config"], interpolate=False)["paths"]
    assert paths["init_dir"] == "../first"  # beside the run's folder
    assert paths["train"] == f"<paths.train>/{text.name}"  # elsewhere: named by its role
    assert str(tmp_path) not in shipped.read_text() and str(bilm_dir.parent) not in shipped.read_text()
    assert record["warm_started_from"]["config"] == ship_module.portable_config(
        json.loads((first / "provenance.json").read_text())["config"], None
    )
    assert (
        ship_module.portable_path("C:\\runs\\corpus\\train.txt", "paths.train", tmp_path) == "<paths.train>/train.txt"
    )
    assert (
        ship_module.portable_path("corpus/pretrain/train.txt", "paths.train", tmp_path) == "corpus/pretrain/train.txt"
    )
