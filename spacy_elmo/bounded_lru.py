"""The one bounded LRU, used by the biLM's type cache (a count of token vectors) and the
component's cache of outputs (megabytes of layers).

Entries are kept in use order, each with a cost (1 for a count bound, its bytes for a memory
bound); putting one drops the least recently used while the costs exceed the bound. Ours, as
``functools.lru_cache`` bounds a function's calls, not entries put by hand with a cost, and no
library the package already needs has one (cachetools' ``LRUCache`` would be an install
requirement of its own for these few lines).
"""

from collections import OrderedDict
from typing import Any, Callable, Hashable, Optional


def _one(value: Any) -> int:
    return 1


class BoundedLru:
    def __init__(self, bound: float, cost: Callable[[Any], int] = _one) -> None:
        self.bound = bound
        self._cost = cost
        self._entries: "OrderedDict[Hashable, Any]" = OrderedDict()
        self.total = 0  # the entries' summed cost
        self.evictions = 0  # entries dropped for room

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def peek(self, key: Hashable) -> Any:
        """The entry at ``key`` (there must be one), its place in the use order unchanged."""
        return self._entries[key]

    def get(self, key: Hashable) -> Optional[Any]:
        """The entry at ``key``, now the most recently used, or None."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> bool:
        """Keep ``value`` at ``key`` as the most recently used (an entry already there stays, moved
        to the end); one costing more than the whole bound is not kept. Whether it is now kept."""
        if key in self._entries:
            self._entries.move_to_end(key)
            return True
        cost = self._cost(value)
        if cost > self.bound:
            return False
        self._entries[key] = value
        self.total += cost
        while self.total > self.bound:
            _, evicted = self._entries.popitem(last=False)
            self.total -= self._cost(evicted)
            self.evictions += 1
        return True

    def clear(self) -> None:
        self._entries.clear()
        self.total = 0
