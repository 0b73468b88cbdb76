"""The spaCy behaviour spacy_elmo/spacy_frames.py reads from the call stack.

If a spaCy release changes it, these fail (and name what changed) before users
see a saved pipeline refuse to load or replace_listeners write a wrong config.
"""

import pytest
import spacy
from spacy.language import Language

from spacy_elmo.errors import ElmoError
from spacy_elmo.listener_config import replace_listener_cfg
from spacy_elmo.spacy_frames import building_from_config, listener_path_being_replaced

SEEN = []


@Language.factory("spacy_frames_probe")
def make_probe(nlp: Language, name: str):
    SEEN.append(building_from_config())
    return lambda doc: doc


def test_building_from_config_is_seen_in_from_config_and_spacy_load_only(tmp_path):
    SEEN.clear()
    nlp = spacy.blank("en")
    nlp.add_pipe("spacy_frames_probe")
    assert SEEN == [False], "a user's add_pipe counted as building from config"
    type(nlp).from_config(nlp.config)
    nlp.to_disk(tmp_path / "pipeline")
    spacy.load(tmp_path / "pipeline")
    assert SEEN == [False, True, True], (
        "spaCy's Language.from_config no longer builds the pipes on its own stack frame: "
        "spacy_elmo/spacy_frames.py:building_from_config needs another way"
    )
    assert building_from_config() is False


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
