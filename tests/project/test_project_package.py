"""The package holds the library only: the project's workflow lives in scripts/, beside project.yml."""
import shutil
import subprocess
import sys
import zipfile

from .conftest import REPO

BUILD_FILES = ("setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "README.md")


def test_the_wheel_has_the_library_and_the_default_bilm_and_no_workflow_code(tmp_path):
    # Built from a copy of what setup.py reads: a build/ folder left in the checkout by an
    # earlier build (setuptools reuses it) cannot leak old files into this wheel.
    source = tmp_path / "source"
    shutil.copytree(REPO / "spacy_elmo", source / "spacy_elmo", ignore=shutil.ignore_patterns("__pycache__"))
    for name in BUILD_FILES:
        if (REPO / name).is_file():
            shutil.copy(REPO / name, source / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--verbose",
         "--wheel-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    # setuptools warns of data folders it may stop shipping: the bundled biLM is declared, so no warning.
    assert "absent from the `packages` configuration" not in build.stdout + build.stderr
    (wheel,) = (tmp_path / "dist").glob("spacy_elmo-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "spacy_elmo/data/default_bilm/weights.hdf5" in names and "spacy_elmo/pipeline/elmo.py" in names
    assert "spacy_elmo/data/default_bilm/options.json" in names
    assert not [name for name in names if name.startswith("spacy_elmo/project/")]
    # nothing beside the package and its metadata: no script became a top-level module
    assert {name.split("/")[0] for name in names} == {"spacy_elmo", wheel.name.split("-py")[0] + ".dist-info"}
