import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).parent.parent.parent
# The project's scripts import each other as plain modules (`python scripts/x.py`
# puts scripts/ first on sys.path); the tests import them the same way.
SCRIPTS = REPO / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

import conll  # noqa: E402
import sentiment  # noqa: E402

# Tiny hand-written inputs in the formats of the real data (no real data is committed).
PROJECT_DATA = Path(__file__).parent.parent / "data" / "project"
CONLL_FILES = [PROJECT_DATA / "conll" / name for name in ("train.txt", "valid.txt", "test.txt")]
SNIPPETS = PROJECT_DATA / "movie_snippets.txt"


def run_cli(main, args):
    """Run a typer main function in-process; returns the click Result."""
    import typer

    app = typer.Typer(add_completion=False)
    app.command()(main)
    return CliRunner().invoke(app, [str(arg) for arg in args])


@pytest.fixture(scope="session")
def prepared_corpora(tmp_path_factory) -> Path:
    """The tiny CoNLL and sentiment inputs converted as the project does."""
    out = tmp_path_factory.mktemp("corpus")
    result = run_cli(conll.main, [*CONLL_FILES, out / "conll", "--n-sents", "2"])
    assert result.exit_code == 0, result.output
    result = run_cli(sentiment.main, [SNIPPETS, out / "sentiment"])
    assert result.exit_code == 0, result.output
    return out
