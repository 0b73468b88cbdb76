"""Overlapping windows for token runs longer than the biLM should see at once.

A run of ``n > size`` tokens (a long doc without sentence boundaries, a very
long line) is covered by windows of ``size`` tokens every ``size // 2``
tokens, the last one ending at the run's end. Each token takes its vectors from
the window it sits most centrally in (the window's own tokens) (the cut between two windows is the
middle of their overlap), so no token is near the edge of the context it
gets, except at the run's own ends; the same idea as spacy-transformers'
strided span getter.
"""

from typing import Any, List, NamedTuple

from ..errors import ElmoError


class Window(NamedTuple):
    start: int  # the biLM runs on tokens start:end
    end: int
    own_start: int  # its own tokens, own_start:own_end, take their vectors from its output
    own_end: int

    def owned(self, output: Any) -> Any:
        """Its own tokens' part of the window's output (tokens on axis 1, as in ``(L+1, k, 2P)``): a view."""
        return output[:, self.own_start - self.start : self.own_end - self.start]


def strided_windows(start: int, end: int, size: int) -> List[Window]:
    """Windows covering tokens ``start:end``; their own tokens tile it exactly once."""
    if size < 1:
        raise ElmoError(f"max_length (the biLM's window, in tokens) must be >= 1, got {size}")
    if end - start <= size:
        return [Window(start, end, start, end)] if end > start else []
    stride = max(size // 2, 1)
    starts = list(range(start, end - size, stride)) + [end - size]
    cuts = [(nxt + here + size) // 2 for here, nxt in zip(starts, starts[1:])]
    own_starts = [start] + cuts
    own_ends = cuts + [end]
    return [Window(s, s + size, a, b) for s, a, b in zip(starts, own_starts, own_ends)]
