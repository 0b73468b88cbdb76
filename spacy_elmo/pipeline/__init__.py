"""The spaCy side: the `elmo` component and its Doc/Token/Span extensions."""

from .elmo import ElmoComponent, make_elmo
from .extensions import add_vector_hooks, install_extensions

__all__ = ["ElmoComponent", "add_vector_hooks", "install_extensions", "make_elmo"]
