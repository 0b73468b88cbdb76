"""setup.py declares no floor that no test ran: each requirement's floor is what `make test-floors`
(.ci/floors) installs on some Python, every version it installs is in the declared range, and
python_requires is the oldest Python it runs."""

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).parent.parent
FLOORS = (REPO / ".ci" / "floors").read_text(encoding="utf8")
SETUP = (REPO / "setup.py").read_text(encoding="utf8")


def declared(python: str) -> dict:
    """name -> setup.py's install_requires entry that applies on ``python``."""
    requires = SETUP.split("install_requires=[")[1].split("]")[0]
    entries = [Requirement(text) for text in re.findall(r'^\s*"([^"]+)",', requires, re.M)]
    return {r.name: r for r in entries if r.marker is None or r.marker.evaluate({"python_version": python})}


def floor(requirement: Requirement) -> str:
    return next(spec.version for spec in requirement.specifier if spec.operator == ">=")


def pins_on(python: str) -> dict:
    """name -> the version .ci/floors installs on ``python``."""
    common = re.search(r'^COMMON="([^"]*)"', FLOORS, re.M).group(1)
    row = re.search(
        rf"^\s*(?:[\d.]+ \| )*{re.escape(python)}(?: \| [\d.]+)*\) echo \"\$COMMON ([^\"]*)\"", FLOORS, re.M
    )
    assert row, f".ci/floors lists no floors for Python {python}"
    return dict(pin.split("==") for pin in (common + " " + row.group(1)).split())


def version(text: str) -> tuple:
    release = Version(text).release
    return release + (0,) * (3 - len(release))  # 2.5 is 2.5.0


def pythons_the_floors_run() -> list:
    return re.search(r'PYTHONS=\$\{\*:-"([^"]*)"\}', FLOORS).group(1).split()


# What the component needs at run time (setup.py's install_requires, less what moves to extras).
RUNTIME = ("torch", "spacy", "thinc", "numpy", "confection", "srsly", "typer", "click", "h5py", "filelock")


def test_every_version_tested_is_in_the_declared_range_and_every_declared_floor_is_tested():
    pythons = pythons_the_floors_run()
    assert pythons[0] == re.search(r'python_requires=">=([\d.]+)"', SETUP).group(1)
    floors_tested = set()
    for python in pythons:
        pins, requirements = pins_on(python), declared(python)
        assert set(RUNTIME) <= set(requirements), python
        outside = {name: pins.get(name) for name in RUNTIME if pins.get(name) not in requirements[name].specifier}
        assert outside == {}, f"Python {python}: installed outside setup.py's range"
        floors_tested |= {
            (name, version(floor(requirements[name])))
            for name in RUNTIME
            if version(pins[name]) == version(floor(requirements[name]))
        }
    every_floor = {
        (name, version(floor(r))) for python in pythons for name, r in declared(python).items() if name in RUNTIME
    }
    assert every_floor - floors_tested == set(), "declared floors that no Python of the floors run installs"


def test_the_development_pages_matrix_is_what_the_floors_run_installs_on_every_python():
    pythons = pythons_the_floors_run()
    page = (REPO / "docs" / "development.md").read_text(encoding="utf8")
    rows = {}
    for line in page.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if re.fullmatch(r"3\.\d+", cells[0]):
            rows[cells[0]] = cells[1:]
    assert sorted(rows, key=version) == pythons
    for python in pythons:
        pins = pins_on(python)
        columns = ("torch", "spacy", "thinc", "confection", "numpy", "srsly", "h5py", "typer", "click", "filelock")
        assert rows[python][: len(columns)] == [pins[name] for name in columns], python
        assert rows[python][len(columns)].startswith("passed"), f"Python {python} at the floors: {rows[python][-1]}"
    assert "[tested at the declared floors](docs/development.md#declared-ranges-tested-at-their-floors)" in (
        REPO / "README.md"
    ).read_text(encoding="utf8")
