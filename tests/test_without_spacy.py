"""The network and its file formats stand apart from spaCy: in a process where importing spacy or
thinc fails, every module of ``spacy_elmo.bilm`` and ``spacy_elmo.formats`` imports, a biLM is
built, written as a biLM directory and read back with the same outputs."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import spacy_elmo

REPO = Path(spacy_elmo.__file__).parent.parent

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["spacy"] = None  # ``import spacy`` (and any spacy.x) now raises ImportError
    sys.modules["thinc"] = None
    import importlib, pkgutil

    import numpy, torch
    import spacy_elmo.bilm, spacy_elmo.formats

    names = []
    for package in (spacy_elmo.bilm, spacy_elmo.formats):
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    for name in names:
        importlib.import_module(name)
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("spacy", "thinc"))
    assert loaded == ["spacy", "thinc"], loaded  # only the blocked entries themselves

    from spacy_elmo.bilm import ElmoBiLM, ElmoOptions

    torch.manual_seed(0)
    options = ElmoOptions(char_dim=4, filters=[(1, 4), (2, 6)], n_highway=1, projection_dim=8, lstm_dim=16,
                          n_layers=2, cell_clip=3.0, proj_clip=3.0, use_skip_connections=True)
    bilm = ElmoBiLM(options).eval()
    out = sys.argv[1]
    bilm.to_files(out + "/options.json", out + "/weights.hdf5")
    again = ElmoBiLM.from_dir(out)
    sentences = [["A", "tiny", "biLM", "."], ["Without", "spaCy"]]
    for before, after in zip(bilm.embed_batch(sentences), again.embed_batch(sentences)):
        assert numpy.array_equal(before, after)
    print(len(names), "modules;", [v.shape for v in again.embed_batch(sentences)])
    """
)


def test_the_network_and_formats_import_and_run_where_spacy_and_thinc_cannot_be_imported(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    modules = len(
        list((REPO / "spacy_elmo" / "bilm").rglob("*.py")) + list((REPO / "spacy_elmo" / "formats").rglob("*.py"))
    )
    assert done.stdout.strip() == f"{modules - 2} modules; [(3, 4, 16), (3, 2, 16)]"  # all but the two __init__
    assert sorted(p.name for p in tmp_path.iterdir()) == ["options.json", "weights.hdf5"]
