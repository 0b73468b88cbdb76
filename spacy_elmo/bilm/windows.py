"""Overlapping windows for token runs longer than the biLM should see at once.

A run of ``n > size`` tokens (a long doc without sentence boundaries, a very
long line) is covered by windows of ``size`` tokens every ``size // 2``
tokens, the last one ending at the run's end. Each token takes its vectors from
the window it sits most centrally in (the window's own tokens; the cut between two windows is the
middle of their overlap), so no token is near the edge of the context it
gets, except at the run's own ends; the same idea as spacy-transformers'
strided span getter. ``WindowAssembly`` puts the windows' own tokens back into their
runs: the one assembly, for the component's docs and ``embed_batch``'s sentences alike.
"""

from typing import Any, List, NamedTuple, Optional, Sequence

import numpy

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


class WindowAssembly:
    """Runs (sentences, docs: ``lengths`` tokens each) put back together from their windows'
    own tokens as the caller hands them in (``place``; the caller drives, so nothing here
    calls back into it). ``results``: each run's array, or None where no piece arrived (the
    caller knows what an empty run is)."""

    def __init__(self, lengths: Sequence[int], token_axis: int = 1):
        self.lengths, self.token_axis = lengths, token_axis
        self.results: List[Optional[Any]] = [None] * len(lengths)

    def place(self, index: int, window: Window, piece: Any) -> None:
        """``piece``: window ``window``'s own tokens of run ``index``, on ``token_axis`` (numpy,
        or cupy through numpy's dispatch). A run in one window is its piece, uncopied."""
        n_tokens = self.lengths[index]
        if window.own_start == 0 and window.own_end == n_tokens:
            self.results[index] = piece  # the whole run in one window: no copy
            return
        whole = self.results[index]
        if whole is None:
            axis = self.token_axis
            shape = piece.shape[:axis] + (n_tokens,) + piece.shape[axis + 1 :]
            whole = self.results[index] = numpy.zeros_like(piece, shape=shape, order="C")
        whole[(slice(None),) * self.token_axis + (slice(window.own_start, window.own_end),)] = piece
