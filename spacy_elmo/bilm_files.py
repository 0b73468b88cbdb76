"""Where the network's file entry points find the code that reads and writes the files.

``ElmoBiLM.from_files``/``from_dir``/``from_efml``/``to_files`` and ``ElmoOptions.from_file``/
``to_file`` are the documented API, on the network's own classes; the files are
``spacy_elmo/formats/``'s, which build on the network (its options, weight layouts and
vocabulary), so the network may not import them. It asks this slot instead, which the
package's ``__init__`` (the one module above both, run before either) fills with the
formats' entry points (``formats/network_files.py``), imported when first asked for: a
slot the formats filled on import would be empty until something imported them, and
importing them from ``__init__`` would load torch for ``python -m spacy_elmo --help``."""

from typing import Any, Callable

from .errors import ElmoError


def _unwired() -> Any:
    raise ElmoError("spacy_elmo's file formats are not wired to the network (spacy_elmo/__init__.py does it)")


_provider: Callable[[], Any] = _unwired


def provide(provider: Callable[[], Any]) -> None:
    """``provider()`` gives the formats' entry points (called by the package's ``__init__``)."""
    global _provider
    _provider = provider


def formats() -> Any:
    """The formats' entry points (``spacy_elmo.formats.network_files``)."""
    return _provider()
