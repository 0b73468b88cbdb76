"""The config ``nlp.replace_listeners`` writes for an ELMo listener it replaces.

spaCy calls the producer's ``replace_listener_cfg`` hook with the pipe's whole
``model.tok2vec`` block; this module rewrites that block so the saved config
matches the replaced model. It edits configs only (no model code), and reads
the path being written from spaCy's stack (``spacy_frames``).
"""

from typing import Any, Dict, Iterator, Tuple

from .errors import ElmoError
from .spacy_frames import listener_path_being_replaced

# Where spaCy's replace_listeners takes the block it passes the hook from.
BLOCK_PATH = "model.tok2vec"


def replace_listener_cfg(producer_model_cfg: Dict[str, Any], listener_cfg: Dict[str, Any]) -> Dict[str, Any]:
    """The config that replaces a listener's, for the path ``nlp.replace_listeners`` writes it to.

    spaCy passes the pipe's whole ``model.tok2vec`` block, which may wrap the
    listener (``ElmoConcat``: ``model.tok2vec.elmo``). The result is that block
    with the listener swapped for a standalone biLM, cut to the path being
    written, so ``model.tok2vec`` and ``model.tok2vec.elmo`` both give a config
    that matches the replaced model (and so saves and loads). A path that holds no
    listener (``model.tok2vec.embed``) is refused before spaCy writes anything: spaCy
    would write the config there and replace the listener's model all the same, and the
    saved pipeline would not load. spaCy does not pass that path: it is read from its
    stack (``spacy_frames``).
    """
    listeners = dict(_listener_cfgs(listener_cfg, BLOCK_PATH))
    if not listeners:
        raise ElmoError("no spacy-elmo.ElmoListener config found where the listener should be")
    path = listener_path_being_replaced()
    if path is None:
        if listeners.get(BLOCK_PATH) is listener_cfg:  # not nested: the path does not matter
            return _standalone(producer_model_cfg, listener_cfg)
        raise ElmoError(
            "cannot tell which listener path nlp.replace_listeners writes this config to: the listener "
            "sits inside its pipe's model.tok2vec block, and the installed spaCy does not call the "
            "replace_listener_cfg hook the way spacy_elmo/spacy_frames.py expects (spaCy 3.8)"
        )
    inside = path == BLOCK_PATH or path.startswith(BLOCK_PATH + ".")
    under = [where for where in listeners if where == path or where.startswith(path + ".")]
    if not inside or not under:
        raise ElmoError(
            f"nlp.replace_listeners: {path!r} holds no ELMo listener; the listener's path is "
            f"{' or '.join(map(repr, listeners))} (or a block above it, up to {BLOCK_PATH!r})"
        )
    found = listeners[under[0]]
    block = _swapped(listener_cfg, found, _standalone(producer_model_cfg, found))
    for key in path.split(".")[2:]:
        block = block[key]
    return block


def _standalone(producer_model_cfg: Dict[str, Any], listener_cfg: Dict[str, Any]) -> Dict[str, Any]:
    settings = {k: v for k, v in listener_cfg.items() if k not in ("@architectures", "upstream")}
    return {"@architectures": "spacy-elmo.ElmoStandalone.v1", "bilm": producer_model_cfg, **settings}


def _swapped(cfg: Any, old: Dict[str, Any], new: Dict[str, Any]) -> Any:
    """A copy of ``cfg`` with the sub-config ``old`` (by identity) replaced by ``new``."""
    if cfg is old:
        return new
    if isinstance(cfg, dict):
        return {key: _swapped(value, old, new) for key, value in cfg.items()}
    return cfg


def _listener_cfgs(cfg: Any, path: str) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """Each ELMo listener config in ``cfg`` (found at ``path``) with its path, in order."""
    if isinstance(cfg, dict):
        if str(cfg.get("@architectures", "")).startswith("spacy-elmo.ElmoListener"):
            yield path, cfg
            return
        for key, value in cfg.items():
            yield from _listener_cfgs(value, f"{path}.{key}")
