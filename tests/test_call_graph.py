"""The run-time call graph of one ``nlp(text)`` through ``elmo`` and an ``ner`` that listens to it:
no two library files call each other, and no lower room calls a higher one (bilm/ < layers/ <
pipeline/). A call is counted from the nearest library frame below it, so a callback that reaches
the library through thinc or torch counts as the library's own call."""

import sys
from pathlib import Path
from typing import Dict, Optional, Set, Tuple

import pytest
import spacy
from spacy.training import Example

from .conftest import tiny_bilm
from .test_listener import add_ner, listener

PACKAGE = Path(__file__).resolve().parent.parent / "spacy_elmo"
# Lower rooms first: a call from a room into a later one is a call upward.
ROOMS = ("bilm", "layers", "pipeline")
Edge = Tuple[str, str]


def _library_file(filename: str) -> Optional[str]:
    path = Path(filename)
    return path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else None


def traced_calls(function) -> Set[Edge]:
    """The (caller file, callee file) pairs of library files while ``function()`` runs."""
    files: Dict[str, Optional[str]] = {}
    edges: Set[Edge] = set()

    def library_file(code) -> Optional[str]:
        name = code.co_filename
        if name not in files:
            files[name] = _library_file(name)
        return files[name]

    def profile(frame, event, arg) -> None:
        if event != "call":
            return
        callee = library_file(frame.f_code)
        if callee is None:
            return
        caller_frame = frame.f_back
        while caller_frame is not None and library_file(caller_frame.f_code) is None:
            caller_frame = caller_frame.f_back
        if caller_frame is not None:
            caller = library_file(caller_frame.f_code)
            if caller != callee:
                edges.add((caller, callee))  # type: ignore[arg-type]

    sys.setprofile(profile)
    try:
        function()
    finally:
        sys.setprofile(None)
    return edges


def mutual_pairs(edges: Set[Edge]) -> Set[Edge]:
    return {(a, b) for a, b in edges if (b, a) in edges and a < b}


def upward_calls(edges: Set[Edge]) -> Set[Edge]:
    def rank(path: str) -> Optional[int]:
        room = path.split("/")[0]
        return ROOMS.index(room) if room in ROOMS else None

    return {
        (a, b)
        for a, b in edges
        if rank(a) is not None and rank(b) is not None and rank(a) < rank(b)  # type: ignore[operator]
    }


def elmo_ner_pipeline(tmp_path, grad_factor=0.0):
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    tiny_bilm(seed=3).to_files(options, weights)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"options_file": str(options), "weight_file": str(weights)})
    add_ner(nlp, listener(grad_factor=grad_factor))
    nlp.get_pipe("ner").add_label("PER")
    return nlp


def test_one_doc_through_elmo_and_a_listening_ner_calls_only_downward(tmp_path):
    nlp = elmo_ner_pipeline(tmp_path)
    nlp.initialize()
    nlp("warm up the caches .")
    edges = traced_calls(lambda: nlp("Alice lives in Paris . She likes it there ."))
    assert ("pipeline/elmo.py", "layers/bilm_layer.py") in edges  # the trace sees the library
    assert mutual_pairs(edges) == set()
    assert upward_calls(edges) == set()


@pytest.mark.parametrize("grad_factor", [0.0, 1.0])
def test_a_training_step_calls_only_downward_too(tmp_path, grad_factor):
    """The listeners' gradients once went back through a closure of pipeline/elmo.py."""
    nlp = elmo_ner_pipeline(tmp_path, grad_factor)
    examples = [Example.from_dict(nlp.make_doc("Alice lives here ."), {"entities": [(0, 5, "PER")]})]
    optimizer = nlp.initialize(lambda: examples)
    nlp.update(examples, sgd=optimizer)
    edges = traced_calls(lambda: nlp.update(examples, sgd=optimizer))
    assert ("layers/listener.py", "layers/bilm_layer.py") in edges or not grad_factor
    assert mutual_pairs(edges) == set()
    assert upward_calls(edges) == set()


def test_the_trace_finds_a_callback_and_an_upward_call():
    here = _library_file(str(PACKAGE / "bilm" / "x.py"))
    assert here == "bilm/x.py"
    edges = {("bilm/a.py", "layers/b.py"), ("layers/b.py", "bilm/a.py"), ("layers/b.py", "pipeline/c.py")}
    assert mutual_pairs(edges) == {("bilm/a.py", "layers/b.py")}
    assert upward_calls(edges) == {("bilm/a.py", "layers/b.py"), ("layers/b.py", "pipeline/c.py")}
