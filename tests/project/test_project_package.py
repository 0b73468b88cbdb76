"""The package holds the library only (the project's workflow lives in scripts/, beside
project.yml), and its wheel is how a packaged pipeline gets spacy-elmo (not on a registry)."""

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy
import pytest

from .conftest import REPO

BUILD_FILES = ("setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "README.md")


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory):
    """The spacy-elmo wheel, built as the README says (`pip wheel --no-deps`), and pip's output.

    Built from a copy of what setup.py reads: a build/ folder left in the checkout by an
    earlier build (setuptools reuses it) cannot leak old files into this wheel."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "source"
    shutil.copytree(REPO / "spacy_elmo", source / "spacy_elmo", ignore=shutil.ignore_patterns("__pycache__"))
    for name in BUILD_FILES:
        if (REPO / name).is_file():
            shutil.copy(REPO / name, source / name)
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--verbose",
            "--wheel-dir",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("spacy_elmo-*.whl")
    return wheel, build.stdout + build.stderr


def test_the_wheel_has_the_library_and_the_default_bilm_and_no_workflow_code(wheel_build):
    wheel, output = wheel_build
    # setuptools warns of data folders it may stop shipping: the bundled biLM is declared, so no warning.
    assert "absent from the `packages` configuration" not in output
    names = zipfile.ZipFile(wheel).namelist()
    assert "spacy_elmo/data/default_bilm/weights.hdf5" in names and "spacy_elmo/pipeline/elmo.py" in names
    assert "spacy_elmo/data/default_bilm/options.json" in names
    assert not [name for name in names if name.startswith("spacy_elmo/project/")]
    # nothing beside the package and its metadata: no script became a top-level module
    assert {name.split("/")[0] for name in names} == {"spacy_elmo", wheel.name.split("-py")[0] + ".dist-info"}


def test_the_installed_version_is_the_one_in_about_py():
    """`spacy package` pins the installed metadata's version: a stale install would pin the old one."""
    from importlib.metadata import version

    import spacy_elmo

    assert version("spacy-elmo") == spacy_elmo.__version__ == "0.2.0"


def environment_without_spacy_elmo(tmp_path: Path) -> Path:
    """A fresh venv that sees this one's packages (torch, spaCy, ...) but not spacy-elmo: the
    machine of someone who installed the dependencies and now follows the README's route."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in ours.iterdir():
        if "spacy_elmo" not in entry.name and not entry.name.endswith(".pth"):
            (deps / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "dependencies.pth").write_text(f"{deps}\n")
    return python


def pip(python: Path, *args: str) -> subprocess.CompletedProcess:
    """This pip, installing into ``python``'s environment, from local files only."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", *args],
        capture_output=True,
        text=True,
        cwd=python.parent,
    )


@pytest.mark.slow  # four interpreters importing torch and spaCy: about a minute
def test_a_packaged_pipeline_installs_after_the_spacy_elmo_wheel(wheel_build, tmp_path):
    """The README's route: build the spacy-elmo wheel, install it, then the packaged pipeline,
    whose requirements name this spacy-elmo version (pip checks them against what is installed)."""
    import spacy
    from spacy.util import get_minor_version_range

    import spacy_elmo
    from tests.conftest import tiny_bilm

    tiny_bilm().to_files(tmp_path / "options.json", tmp_path / "weights.hdf5")
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "elmo", config={"options_file": str(tmp_path / "options.json"), "weight_file": str(tmp_path / "weights.hdf5")}
    )
    nlp.initialize()
    nlp.to_disk(tmp_path / "pipeline")
    expected = nlp("a packaged pipeline")._.elmo_layers
    (tmp_path / "pkg").mkdir()
    package = subprocess.run(
        [
            sys.executable,
            "-m",
            "spacy",
            "package",
            str(tmp_path / "pipeline"),
            str(tmp_path / "pkg"),
            "--build",
            "none",
            "--name",
            "elmo_route",
            "--version",
            "0.0.1",
        ],
        capture_output=True,
        text=True,
    )
    assert package.returncode == 0, package.stdout + package.stderr
    source = tmp_path / "pkg" / "en_elmo_route-0.0.1"
    requirements = json.loads((source / "meta.json").read_text())["requirements"]
    assert f"spacy-elmo{get_minor_version_range(spacy_elmo.__version__)}" in requirements

    python = environment_without_spacy_elmo(tmp_path)
    wheel, _ = wheel_build
    for step in (pip(python, str(wheel)), pip(python, "--no-build-isolation", str(source))):
        assert step.returncode == 0, step.stdout[-2000:] + step.stderr[-2000:]
    run = subprocess.run(
        [
            str(python),
            "-c",
            "import json, spacy, spacy_elmo; nlp = spacy.load('en_elmo_route'); "
            "print(json.dumps([spacy_elmo.__file__, nlp('a packaged pipeline')._.elmo_layers.tolist()]))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    location, layers = json.loads(run.stdout)
    assert location.startswith(str(python.parent.parent))  # the wheel's copy, not this checkout's
    numpy.testing.assert_allclose(numpy.array(layers), expected, atol=1e-6)
