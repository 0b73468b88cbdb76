"""Nothing POSIX-only at import or on the component's path: with ``fcntl`` unimportable, as on
Windows, every module of spacy_elmo imports, the README's quickstart runs, and an output's lock
still refuses a second writer."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import spacy_elmo

REPO = Path(spacy_elmo.__file__).parent.parent
# Run first in each child: ``import fcntl`` then raises ImportError, as on Windows.
NO_FCNTL = "import sys\nsys.modules['fcntl'] = None\n"


def run_without_fcntl(script: str, cwd: Path) -> str:
    """``script``'s output, run in a fresh interpreter where ``fcntl`` cannot be imported."""
    done = subprocess.run(
        [sys.executable, "-c", NO_FCNTL + textwrap.dedent(script)],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def readme_quickstart() -> str:
    """The README's Python block, the quickstart a new user copies."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf8"), re.S)
    assert len(blocks) == 1 and 'nlp.add_pipe("elmo")' in blocks[0]
    return blocks[0]


def test_every_module_imports_and_the_quickstart_runs_without_fcntl(tmp_path):
    script = textwrap.dedent(
        """
        import importlib, pkgutil
        import spacy_elmo

        names = [m.name for m in pkgutil.walk_packages(spacy_elmo.__path__, "spacy_elmo.")]
        for name in names:
            importlib.import_module(name)
        assert sys.modules["fcntl"] is None
        print(len(names), "modules")
        """
    ) + textwrap.dedent(readme_quickstart())
    script += 'print("shape", tuple(doc._.elmo_layers.shape), tuple(doc[2]._.elmo.shape))\n'
    out = run_without_fcntl(script, tmp_path)
    assert int(out.split(" modules")[0]) == len(list((REPO / "spacy_elmo").rglob("*.py"))) - 1  # all but __init__
    assert "shape (3, 12, 512) (512,)" in out  # 11 words and the full stop


def test_without_fcntl_a_second_writer_is_refused_and_the_lock_freed(tmp_path):
    out = run_without_fcntl(
        """
        from pathlib import Path
        from spacy_elmo.errors import ElmoLockedError
        from spacy_elmo.files import locks

        assert locks._FCNTL is None
        out = Path("out.hdf5")
        with locks.exclusive_lock(out, "OUTPUT_FILE"):
            try:
                with locks.exclusive_lock(out, "OUTPUT_FILE"):
                    print("locked twice")
            except ElmoLockedError as err:
                print("refused:", err)
        with locks.exclusive_lock(out, "OUTPUT_FILE"):
            print("locked again")
        """,
        tmp_path,
    )
    assert "locked twice" not in out
    assert "refused: OUTPUT_FILE out.hdf5 is being written by another run (" in out
    assert "lock file out.hdf5.lock): wait for it to finish, or give another output" in out
    assert out.rstrip().endswith("locked again")
