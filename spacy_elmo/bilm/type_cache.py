"""A bounded LRU of context-independent token vectors, across batches and documents.

The char CNN + highway + projection output of a token type depends on its
characters and the weights alone (bilm-tf's ``dump_token_embeddings`` idea,
made automatic): text repeats a lot, so most tokens of a new batch were
encoded before. Entries are dropped whenever the encoder's weights or
precision change.
"""

from typing import Callable, Dict, Hashable, List, Optional, cast

import numpy
import torch
from torch import Tensor

from ..bounded_lru import BoundedLru
from ..errors import ElmoError

# Types kept by default: 16,384 x 512 floats = 32 MB for the original size, 8 MB for the small one.
DEFAULT_TYPE_CACHE_SIZE = 16384


class TypeCache:
    def __init__(self, max_types: int = DEFAULT_TYPE_CACHE_SIZE):
        if max_types < 0:
            raise ElmoError(f"the type cache size must be >= 0 types, got {max_types}")
        self.max_types = max_types
        self._vectors = BoundedLru(max_types)  # each type costs 1
        self._owner: Optional[Hashable] = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._vectors)

    def clear(self) -> None:
        self._vectors.clear()

    def stats(self) -> Dict[str, float]:
        looked_up = self.hits + self.misses
        return {
            "hits": self.hits,
            "misses": self.misses,
            "types": len(self),
            "hit_rate": self.hits / looked_up if looked_up else 0.0,
        }

    def encode(
        self,
        type_chars: Tensor,
        encoder: Callable[[Tensor], Tensor],
        owner: Hashable,
        device: Optional[torch.device] = None,
    ) -> Tensor:
        """``encoder(type_chars)`` on ``device`` (default: where the ids are) for ``(U, max_chars)`` distinct ids (best on the
        host, where they are keyed), computing only the types not cached. ``owner``
        identifies the weights: a new one empties the cache."""
        if not self.max_types:
            return encoder(_on(type_chars, device))
        if owner != self._owner:
            self.clear()
            self._owner = owner
        keys = _row_keys(type_chars)
        missing = [k for k, key in enumerate(keys) if key not in self._vectors]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        fresh = dict(zip(missing, encoder(_on(type_chars[missing], device)))) if missing else {}
        # A fresh vector gets its own storage (clone): an entry must not keep its batch alive.
        vectors = [fresh[k].clone() if k in fresh else self._vectors.peek(key) for k, key in enumerate(keys)]
        for key, vector in zip(keys, vectors):  # this batch's types, now the most recently used
            self._vectors.put(key, vector)
        return torch.stack(vectors) if vectors else encoder(_on(type_chars, device))


def _on(tensor: Tensor, device: Optional[torch.device]) -> Tensor:
    return tensor if device is None else tensor.to(device)


def _row_keys(type_chars: Tensor) -> List[bytes]:
    """Each row's bytes, in one pass (a void view) rather than a tobytes() call per row."""
    rows = numpy.ascontiguousarray(type_chars.cpu().numpy())  # no copy for host ids
    # cast: numpy types a void array's tolist() loosely; each item is that row's bytes.
    return cast(List[bytes], rows.view(numpy.dtype((numpy.void, rows.shape[1] * rows.itemsize))).ravel().tolist())
