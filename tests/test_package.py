"""The package as a registry would get it: the sdist and wheel built from this checkout ship the
LICENSE, the bundled biLM with its notice and py.typed, no path of the machine that built or trained
them, and only the component's requirements."""

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from spacy_elmo.about import __version__

REPO = Path(__file__).resolve().parent.parent
# An absolute path of a build or training machine: POSIX home, work and temporary folders (macOS's
# too), or a Windows drive, raw or JSON-escaped. A relative path ("corpus/tmp/x") or a URL's path
# ("https://host/home/") has a word character before its slash and does not match.
MACHINE_PATH = re.compile(
    r"(?<![\w.~-])/(?:root|home|work|tmp|Users|private/var|var/folders)/|(?<![\w\\])[A-Z]:\\{1,2}[\w ]"
)
# The repository's workbench: tests, reports, project folders and run outputs (spacy_elmo/training/
# is the package's `spacy train` add-ons, the project's /training/ its trained pipelines).
WORKBENCH = re.compile(
    r"(^|/)(tests?|reports|runs|benchmarks|scripts|configs|assets|corpus|metrics)/|^training/|\.(pt|spacy|png)$"
)
# What the component needs at run time (setup.py's install_requires, by name).
RUNTIME_REQUIREMENTS = {"torch", "spacy", "thinc", "numpy", "confection", "srsly", "typer", "h5py", "tqdm"}


def source_files() -> List[str]:
    """The files a build sees: tracked ones and new ones git does not ignore (never .venv, runs, build outputs)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode("utf8")
    return [name for name in listed.split("\0") if name and (REPO / name).is_file()]


def copy_sources(dest: Path) -> Path:
    for name in source_files():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, dest / name)
    return dest


def built(dist: Path) -> Tuple[Path, Path]:
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> Tuple[Path, Path]:
    """sdist and wheel, built by setuptools' PEP 517 backend in a copy of the sources (no network,
    no build outputs left in the checkout); the slow test builds them with `python -m build`."""
    src = copy_sources(tmp_path_factory.mktemp("src"))
    dist = tmp_path_factory.mktemp("dist")
    backend = f"from setuptools import build_meta as b; b.build_sdist({str(dist)!r}); b.build_wheel({str(dist)!r})"
    subprocess.run([sys.executable, "-c", backend], cwd=src, check=True, capture_output=True)
    return built(dist)


def shipped_texts(sdist: Path, wheel: Path) -> Iterator[Tuple[str, str]]:
    """(name, text) of every text file the sdist and wheel hold; binary files (NUL bytes or not
    UTF-8, e.g. weights.hdf5) are skipped."""
    members: List[Tuple[str, bytes]] = []
    with zipfile.ZipFile(wheel) as zf:
        members += [(f"{wheel.name}:{n}", zf.read(n)) for n in zf.namelist() if not n.endswith("/")]
    with tarfile.open(sdist) as tf:
        for member in tf.getmembers():
            data = tf.extractfile(member) if member.isfile() else None
            if data is not None:
                members.append((f"{sdist.name}:{member.name}", data.read()))
    for name, data in members:
        if b"\0" not in data:
            try:
                yield name, data.decode("utf8")
            except UnicodeDecodeError:
                continue


def test_the_machine_path_pattern_finds_absolute_paths_only():
    found = ["/root/runs/x", "/home/me/x", '"/work/main/x"', "/tmp/a", "C:\\Users\\x", '"D:\\\\runs\\\\x"']
    kept = ["../corpus_pretrain/train.txt", "<paths.init_dir>/default_bilm", "corpus/tmp/x", "https://h/home/x"]
    assert all(MACHINE_PATH.search(text) for text in found)
    assert not any(MACHINE_PATH.search(text) for text in kept)


def test_no_shipped_file_holds_a_path_of_a_build_or_training_machine(dists):
    """Before issue 74, provenance.json carried the training machines' /root/... and /work/... paths."""
    texts = dict(shipped_texts(*dists))
    assert any(name.endswith("default_bilm/provenance.json") for name in texts)  # JSON is scanned too
    leaks = [f"{name}: {m.group(0)!r}" for name, text in texts.items() for m in MACHINE_PATH.finditer(text)]
    assert not leaks


def test_the_wheel_holds_the_biLM_its_notice_py_typed_and_the_licence_and_nothing_of_the_workbench(dists):
    sdist, wheel = dists
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    dist_info = f"spacy_elmo-{__version__}.dist-info/"
    bilm = "spacy_elmo/data/default_bilm/"
    assert {bilm + "options.json", bilm + "weights.hdf5", bilm + "provenance.json", bilm + "NOTICE.md"} <= names
    assert {"spacy_elmo/py.typed", dist_info + "licenses/LICENSE"} <= names
    assert all(name.startswith(("spacy_elmo/", dist_info)) for name in names), sorted(names)
    assert not [n for n in names if WORKBENCH.search(n)]
    with tarfile.open(sdist) as tf:
        assert f"spacy_elmo-{__version__}/LICENSE" in tf.getnames()
    licence = (REPO / "LICENSE").read_text(encoding="utf8")
    assert licence.startswith("MIT License") and "the spacy-elmo authors" in licence


def requirements(wheel: Path) -> Dict[str, List[str]]:
    """The wheel's Requires-Dist, by extra ("" for the install requirements)."""
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read(f"spacy_elmo-{__version__}.dist-info/METADATA").decode("utf8")
    by_extra: Dict[str, List[str]] = {}
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist: "):
            requirement = line[len("Requires-Dist: ") :]
            extra = re.search(r"""extra\s*==\s*["']([\w-]+)["']""", requirement)
            name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()  # type: ignore[union-attr]
            by_extra.setdefault(extra.group(1) if extra else "", []).append(name)
    return by_extra


def test_the_wheel_requires_only_what_the_component_needs(dists):
    """matplotlib (plots of the project's reports and of pretraining) is the `project` extra's."""
    by_extra = requirements(dists[1])
    assert set(by_extra[""]) == RUNTIME_REQUIREMENTS
    assert "matplotlib" in by_extra["project"]


def test_pretraining_without_matplotlib_skips_its_plot_with_one_warning(monkeypatch, tmp_path):
    from spacy_elmo.pretrain import outputs

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    outputs.warn_no_matplotlib.cache_clear()
    records = [{"step": 1, "loss": 5.0}, {"step": 2, "loss": 4.0, "dev_perplexity": 50.0}]
    png = tmp_path / outputs.CURVE_NAME
    with pytest.warns(UserWarning) as caught:
        outputs.plot_curve(records, png)
        outputs.plot_curve(records, png)  # a later checkpoint: no second warning
    assert [str(w.message) for w in caught if "matplotlib" in str(w.message)] == [
        f"matplotlib is not installed, so pretraining writes no {outputs.CURVE_NAME} (metrics.jsonl has the "
        'same figures); pip install "spacy-elmo[project]" adds it'
    ]
    assert not png.exists()
