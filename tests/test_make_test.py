"""`make test` and `make test-slow` show how far along they are: pytest's per-file lines with their percentage."""

import re
from pathlib import Path

REPO = Path(__file__).parent.parent


def test_make_test_prints_a_line_per_test_file_with_its_percentage():
    """981 tests printed as lines of bare dots (pytest -q: no file names) for 35 minutes."""
    makefile = (REPO / "Makefile").read_text(encoding="utf8")
    for target in ("test", "test-slow"):
        recipe = re.search(rf"^{target}:.*\n\t(.*)$", makefile, re.MULTILINE).group(1)
        assert "-m pytest" in recipe and not re.search(r"\s-q\b", recipe), recipe
    settings = (REPO / "pytest.ini").read_text(encoding="utf8")
    assert "-q" not in settings and "console_output_style" not in settings  # pytest's default: progress
