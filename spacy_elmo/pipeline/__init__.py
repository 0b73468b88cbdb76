"""The spaCy side: the `elmo` component and its Doc/Token/Span extensions."""

from .elmo import ElmoComponent, make_elmo
from .extensions import install_extensions

__all__ = ["ElmoComponent", "install_extensions", "make_elmo"]
