"""The config ``nlp.replace_listeners`` writes for an ELMo listener it replaces.

spaCy calls the producer's ``replace_listener_cfg`` hook with the pipe's whole
``model.tok2vec`` block; this module rewrites that block so the saved config
matches the replaced model. It edits configs only (no model code), and reads
the path being written from spaCy's stack (``spacy_frames``).
"""

from typing import Any, Dict, Optional

from .errors import ElmoError
from .spacy_frames import listener_path_being_replaced


def replace_listener_cfg(producer_model_cfg: Dict[str, Any], listener_cfg: Dict[str, Any]) -> Dict[str, Any]:
    """The config that replaces a listener's, for the path ``nlp.replace_listeners`` writes it to.

    spaCy passes the pipe's whole ``model.tok2vec`` block, which may wrap the
    listener (``ElmoConcat``: ``model.tok2vec.elmo``). The result is that block
    with the listener swapped for a standalone biLM, cut to the path being
    written, so ``model.tok2vec`` and ``model.tok2vec.elmo`` both give a config
    that matches the replaced model (and so saves and loads). spaCy does not
    pass that path: it is read from its stack (``spacy_frames``).
    """
    found = _find_listener_cfg(listener_cfg)
    if found is None:
        raise ElmoError("no spacy-elmo.ElmoListener config found where the listener should be")
    settings = {k: v for k, v in found.items() if k not in ("@architectures", "upstream")}
    standalone = {"@architectures": "spacy-elmo.ElmoStandalone.v1", "bilm": producer_model_cfg, **settings}
    if found is listener_cfg:
        return standalone
    path = listener_path_being_replaced()
    if path is None:
        raise ElmoError(
            "cannot tell which listener path nlp.replace_listeners writes this config to: the listener "
            "sits inside its pipe's model.tok2vec block, and the installed spaCy does not call the "
            "replace_listener_cfg hook the way spacy_elmo/spacy_frames.py expects (spaCy 3.8)"
        )
    if not (path == "model.tok2vec" or path.startswith("model.tok2vec.")):
        return standalone
    block = _swapped(listener_cfg, found, standalone)
    for key in path.split(".")[2:]:
        block = block[key]
    return block


def _swapped(cfg: Any, old: Dict[str, Any], new: Dict[str, Any]) -> Any:
    """A copy of ``cfg`` with the sub-config ``old`` (by identity) replaced by ``new``."""
    if cfg is old:
        return new
    if isinstance(cfg, dict):
        return {key: _swapped(value, old, new) for key, value in cfg.items()}
    return cfg


def _find_listener_cfg(cfg: Any) -> Optional[Dict[str, Any]]:
    if isinstance(cfg, dict):
        if str(cfg.get("@architectures", "")).startswith("spacy-elmo.ElmoListener"):
            return cfg
        for value in cfg.values():
            found = _find_listener_cfg(value)
            if found is not None:
                return found
    return None
