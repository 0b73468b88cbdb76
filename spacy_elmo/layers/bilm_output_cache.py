"""A bounded LRU cache of biLM outputs, keyed by a segment's token texts.

Stateless vectors depend only on the segment's tokens (and the weights), so a
cached result is exact. The cache clears itself when the weights change (their
generation, ``bilm/generation.py``). Entries stay where the biLM computed them:
on a GPU the cache is GPU memory (``cache_size_mb`` of it), and since a cupy
array cannot be made read-only, its entries are copied in and out.
"""

from collections import OrderedDict
from typing import Any, Hashable, Optional

import numpy

from ..settings import KeptOnLoad


class LayerCache(KeptOnLoad):
    """Working memory, never part of a saved model: a load keeps the loading model's cache, emptied."""

    def __init__(self, max_mb: float = 0.0) -> None:
        self.max_bytes = int(max_mb * 2**20)
        self._entries: "OrderedDict[Hashable, Any]" = OrderedDict()
        self._nbytes = 0
        self._weights_key: Optional[Hashable] = None
        self.hits = 0
        self.misses = 0
        self.evictions = 0  # entries dropped for room (a cache smaller than what it is asked to keep)

    def __deepcopy__(self, memo) -> "LayerCache":
        # Copies of a model (e.g. nlp.replace_listeners) start with an empty cache.
        return LayerCache(self.max_bytes / 2**20)

    def __reduce__(self) -> Any:
        # A pickled model (spaCy's n_process under spawn) carries the cache's size, not its entries.
        return LayerCache, (self.max_bytes / 2**20,)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def check_weights(self, weights_key: Hashable) -> None:
        """Drop everything if the weights changed since the entries were made."""
        if weights_key != self._weights_key:
            self.clear()
            self._weights_key = weights_key

    def get(self, key: Hashable) -> Optional[Any]:
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        # A GPU array is handed out as a copy (a device-to-device copy): a caller that
        # writes into it must not change the cached entry.
        return value if isinstance(value, numpy.ndarray) else value.copy()

    def put(self, key: Hashable, value: Any) -> None:
        size = int(value.nbytes)
        if size > self.max_bytes or key in self._entries:
            return
        if isinstance(value, numpy.ndarray):
            value.flags.writeable = False  # shared by every later lookup
        else:  # a GPU array cannot be made read-only: the cache keeps its own copy
            value = value.copy()
        self._entries[key] = value
        self._nbytes += size
        while self._nbytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._nbytes -= int(evicted.nbytes)
            self.evictions += 1

    def clear(self) -> None:
        self._entries.clear()
        self._nbytes = 0

    def on_load(self) -> None:
        self.clear()
