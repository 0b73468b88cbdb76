"""The package as a registry would get it: the sdist and wheel built from this checkout ship the
LICENSE, the bundled biLM with its notice and py.typed, no path of the machine that built or trained
them, and only the component's requirements; the CHANGELOG names this version; the spaCy Universe
entry's example runs offline. Slow: `python -m build` and `twine check`, then the wheel installed
without extras into a fresh virtual environment, where the README's quickstart, `embed --help` and
a part of this suite run against the installed package, not the checkout."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import textwrap
import venv
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
# What the component never needs at run time: plots and the tools of tests, lint and packaging
# (that it needs nothing more than install_requires is the slow test's: the wheel installed alone).
NOT_AT_RUN_TIME = {"matplotlib", "pytest", "ruff", "mypy", "build", "twine"}
# The part of the suite the slow test runs against the installed package: the bundled biLM, the
# component with its saved form, the listener's mix, the char ids.
INSTALLED_SUITE = ["test_default_bilm.py", "test_pipeline.py", "test_scalar_mix.py", "test_char_ids.py"]


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
    assert {"torch", "spacy", "thinc", "numpy", "h5py"} <= set(by_extra[""])
    assert not NOT_AT_RUN_TIME & set(by_extra[""])
    assert "matplotlib" in by_extra["project"]
    assert {"build", "twine"} <= set(by_extra["test"])


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


def test_the_readme_installs_this_version_and_gives_the_wheel_size(dists):
    """README's install section: the published form, and today's wheel by its file name and size."""
    readme = (REPO / "README.md").read_text(encoding="utf8")
    wheel = dists[1]
    assert "pip install spacy-elmo " in readme and f"pip install dist/{wheel.name}" in readme
    assert f"the wheel, {wheel.stat().st_size / 1e6:.1f} MB" in readme


def test_the_changelog_starts_with_this_version():
    headings = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(encoding="utf8"), flags=re.M)
    assert headings and headings[0] == __version__


# The Universe's fields (spaCy's website/UNIVERSE.md) and its categories for projects.
UNIVERSE_FIELDS = {"id", "title", "slogan", "description", "pip", "code_example", "author", "category", "tags"}
UNIVERSE_CATEGORIES = {
    "pipeline",
    "training",
    "conversational",
    "research",
    "scientific",
    "visualizers",
    "apis",
    "nonpython",
    "standalone",
    "models",
}


def universe_entry() -> dict:
    return json.loads((REPO / "universe.json").read_text(encoding="utf8"))


def test_the_universe_entry_has_the_universe_fields():
    entry = universe_entry()
    assert UNIVERSE_FIELDS <= set(entry)
    assert entry["pip"] == "spacy-elmo" and entry["code_language"] == "python"
    assert set(entry["category"]) <= UNIVERSE_CATEGORIES and entry["category"]
    assert all(isinstance(line, str) for line in entry["code_example"]) and all(entry[f] for f in UNIVERSE_FIELDS)


def test_the_universe_code_example_runs_offline(monkeypatch, capsys):
    """The example as the Universe page shows it, with every network connection refused."""

    def refuse(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    namespace: dict = {}
    exec(compile("\n".join(universe_entry()["code_example"]), "universe.json", "exec"), namespace)
    doc = namespace["doc"]
    assert doc._.elmo_layers.shape == (3, len(doc), 512)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"(3, {len(doc)}, 512)"


def readme_quickstart() -> str:
    """The README's Quickstart Python block, as a user would paste it."""
    readme = (REPO / "README.md").read_text(encoding="utf8")
    section = readme.split("## Quickstart", 1)[1]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)  # type: ignore[union-attr]


def run(args: List[str], cwd: Path, timeout: float = 1200) -> str:
    """`args` run without PYTHONPATH, which would put a checkout before the installed package."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.mark.slow
def test_the_built_wheel_installs_without_extras_and_runs_as_the_readme_says(tmp_path_factory):
    """Built as a registry gets it; installed alone (torch 2.13.0 first, then the wheel: its requirements
    come from the package index); run outside the checkout, so `import spacy_elmo` finds the installed copy."""
    work = tmp_path_factory.mktemp("wheel")
    src = copy_sources(work / "src")
    run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(work / "dist"), str(src)], cwd=work)
    sdist, wheel = built(work / "dist")
    run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)], cwd=work)
    venv.create(work / "venv", with_pip=True)
    python = str(work / "venv" / "bin" / "python")
    run([python, "-m", "pip", "install", "--quiet", "torch==2.13.0"], cwd=work)
    run([python, "-m", "pip", "install", "--quiet", str(wheel)], cwd=work)
    run([python, "-m", "pip", "check"], cwd=work)
    installed = run([python, "-c", "import spacy_elmo; print(spacy_elmo.__file__)"], cwd=work)
    assert "site-packages" in installed and str(REPO) not in installed
    (work / "quickstart.py").write_text(
        readme_quickstart() + "\nassert doc._.elmo_layers.shape == (3, len(doc), 512)\n", encoding="utf8"
    )
    run([python, "quickstart.py"], cwd=work)
    assert "Usage" in run([python, "-m", "spacy_elmo", "embed", "--help"], cwd=work)
    assert run([python, "-c", "import importlib.util as u; print(u.find_spec('matplotlib'))"], cwd=work) == "None\n"
    # A part of the suite, copied out of the checkout (with its data, pytest.ini and the benchmarks
    # two tests import), against the installed package.
    shutil.copytree(REPO / "tests", work / "tests", ignore=shutil.ignore_patterns("project", "__pycache__"))
    shutil.copytree(REPO / "benchmarks", work / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pytest.ini", work / "pytest.ini")
    with (work / "tests" / "conftest.py").open("a", encoding="utf8") as conftest:
        conftest.write(
            textwrap.dedent(
                """

                def pytest_sessionstart(session):
                    import spacy_elmo

                    assert "site-packages" in spacy_elmo.__file__, spacy_elmo.__file__
                """
            )
        )
    run([python, "-m", "pip", "install", "--quiet", "pytest>=7"], cwd=work)
    out = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *[f"tests/{n}" for n in INSTALLED_SUITE]], cwd=work
    )
    assert re.search(r"\d+ passed", out) and "failed" not in out
