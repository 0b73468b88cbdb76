"""The facts spacy-elmo reads from spaCy's call stack: spaCy 3.8 offers no supported way to learn them.

``listener_path_being_replaced``: the path ``Language.replace_listeners`` writes a
producer's ``replace_listener_cfg`` result to. spaCy passes the hook the pipe's
``model.tok2vec`` block whatever the path, and not the path.
Relies on: the hook being called from ``Language.replace_listeners``, whose loop
variable is named ``listener_path``.

``running_spacy_debug_model``: whether ``spacy debug model`` is the caller, read only to
word an error (it updates the upstream of spaCy's own listeners only, so an ELMo
listener's producer never runs there). Relies on: ``spacy.cli.debug_model.debug_model``.

(Where the weights come from needs no such reading: the component checks and reads
the files its config names once, at initialize or its first doc; ``loaders.resolve_bilm``.)

``tests/test_spacy_frames.py`` checks both against the installed spaCy: a spaCy release
that changes them fails there.
"""

import inspect
from typing import Any, Callable, Optional, Tuple

from spacy.language import Language


def _innermost_call(function: Callable, local_name: str) -> Tuple[bool, Any]:
    """Whether ``function`` is running on this thread's stack, and the value of its
    local ``local_name`` in its innermost call (None if it has none)."""
    code = getattr(function, "__func__", function).__code__
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code is code:
                return True, frame.f_locals.get(local_name)
            frame = frame.f_back
        return False, None
    finally:
        del frame  # a frame kept in a local would hold the whole stack alive


def listener_path_being_replaced() -> Optional[str]:
    """The listener path (e.g. ``"model.tok2vec"``) that ``nlp.replace_listeners`` is
    writing a ``replace_listener_cfg`` result to; None outside ``replace_listeners``
    (or if spaCy renamed its loop variable: the test of this module fails then)."""
    running, path = _innermost_call(Language.replace_listeners, "listener_path")
    return path if running and isinstance(path, str) else None


def running_spacy_debug_model() -> bool:
    """Whether ``spacy debug model`` (``spacy.cli.debug_model.debug_model``) is on this thread's stack."""
    from spacy.cli.debug_model import debug_model  # here, not at import: spacy.cli imports its whole CLI

    return _innermost_call(debug_model, "pipe")[0]
