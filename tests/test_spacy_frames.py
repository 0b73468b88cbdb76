"""The spaCy behaviour spacy_elmo/spacy_frames.py reads from the call stack.

If a spaCy release changes it, these fail (and name what changed) before users
see replace_listeners write a wrong config.
"""

import re
from pathlib import Path

import pytest
import spacy
from spacy.language import Language

import spacy_elmo
from spacy_elmo import spacy_frames
from spacy_elmo.errors import ElmoError
from spacy_elmo.listener_config import replace_listener_cfg
from spacy_elmo.spacy_frames import listener_path_being_replaced, running_spacy_debug_model

LIBRARY = Path(spacy_elmo.__file__).parent
STACK_READS = re.compile(r"currentframe|_getframe|inspect\.stack|\.f_back\b")


def test_the_stack_is_read_for_two_facts_only():
    """Where the weights come from is not read from the stack (``loaders.resolve_bilm``
    runs at initialize or the first doc): only replace_listeners' path is, and whether
    spacy debug model is the caller (to word an error)."""
    readers = sorted(
        str(path.relative_to(LIBRARY)) for path in LIBRARY.rglob("*.py") if STACK_READS.search(path.read_text())
    )
    assert readers == ["spacy_frames.py"]
    defined_here = [
        name
        for name, value in vars(spacy_frames).items()
        if callable(value) and not name.startswith("_") and getattr(value, "__module__", "") == spacy_frames.__name__
    ]
    assert defined_here == ["listener_path_being_replaced", "running_spacy_debug_model"]


def tagger_listening_to_tok2vec() -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("tok2vec")
    nlp.add_pipe(
        "tagger",
        config={
            "model": {
                "@architectures": "spacy.Tagger.v2",
                "tok2vec": {"@architectures": "spacy.Tok2VecListener.v1", "width": 96, "upstream": "tok2vec"},
            }
        },
    )
    return nlp


def test_replace_listeners_calls_the_cfg_hook_with_its_path_in_a_local_named_listener_path():
    nlp = tagger_listening_to_tok2vec()
    paths = []

    def hook(producer_cfg, listener_cfg):
        paths.append(listener_path_being_replaced())
        return producer_cfg

    nlp.get_pipe("tok2vec").model.attrs["replace_listener_cfg"] = hook
    nlp.replace_listeners("tok2vec", "tagger", ["model.tok2vec"])
    assert paths == ["model.tok2vec"], (
        "spaCy's Language.replace_listeners no longer calls replace_listener_cfg with the path in a "
        "local named listener_path: spacy_elmo/spacy_frames.py:listener_path_being_replaced needs another way"
    )
    assert listener_path_being_replaced() is None


def test_a_nested_listener_outside_replace_listeners_is_refused_not_guessed():
    listener = {"@architectures": "spacy-elmo.ElmoListener.v1", "upstream": "*", "dropout": 0.1}
    concat = {"@architectures": "spacy-elmo.ElmoConcat.v1", "elmo": listener, "tok2vec": {}}
    producer = {"@architectures": "spacy-elmo.ElmoBiLM.v1"}
    standalone = replace_listener_cfg(producer, listener)  # not nested: no path needed
    assert standalone == {"@architectures": "spacy-elmo.ElmoStandalone.v1", "bilm": producer, "dropout": 0.1}
    with pytest.raises(ElmoError, match="cannot tell which listener path .*spacy_frames.py"):
        replace_listener_cfg(producer, concat)


def test_spacy_debug_model_is_seen_on_the_stack():
    """The ELMo listener's training error names `spacy debug model` when that is the caller."""
    from spacy.cli.debug_model import debug_model

    seen = []

    class Probe:
        @property
        def model(self):  # debug_model's first question about the pipe
            seen.append(running_spacy_debug_model())
            raise AttributeError("model")

    with pytest.raises(SystemExit):  # spaCy: "does not specify an object that holds a Model"
        debug_model({}, {}, spacy.blank("en"), Probe())
    assert seen == [True], "spaCy's debug model no longer runs as spacy_elmo/spacy_frames.py expects"
    assert running_spacy_debug_model() is False
