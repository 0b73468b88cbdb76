"""What ``spacy train`` shows while a frozen biLM fills its layer cache.

The first epoch runs the biLM over every training sentence (minutes on a small
CPU) and spaCy prints nothing until its first evaluation. The elmo component's
``update`` says so once, then gives a progress line at most every
``REPORT_EVERY_S`` seconds, and a last line when the cache serves the training
batches (or is full, or there is none). Only ``update`` reports, never
prediction, so ``nlp(text)`` stays quiet. The lines go to the ``spacy.elmo``
logger at INFO, through spaCy's own handler (stderr, ``[time] [INFO] ...``);
``logging.getLogger("spacy.elmo").setLevel(logging.WARNING)`` silences them.
"""

import logging
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from ..layers.bilm_output_cache import LayerCache

LOGGER = logging.getLogger("spacy.elmo")
REPORT_EVERY_S = 60.0


class CacheFillProgress:
    """One component's report; ``watch`` around each frozen update's prediction."""

    def __init__(self, component: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.component = component
        self.clock = clock
        self.done = False
        self.started = False
        self.docs = 0
        self.next_report = 0.0

    @contextmanager
    def watch(self, cache: LayerCache, n_docs: int) -> Iterator[None]:
        if self.done:
            yield
            return
        misses, hits = cache.misses, cache.hits
        yield
        self.docs += n_docs
        if not cache.max_bytes:
            self._finish(
                "the frozen biLM has no layer cache (cache_size_mb 0): it runs over every batch of every epoch"
            )
        elif not self.started:
            self._start(cache)
        elif cache.evictions:
            self._finish(
                f"the layer cache is full ({_mb(cache.max_bytes)} MB) after {self.docs} training docs: the "
                "sentences beyond it are computed again in every epoch (a larger cache_size_mb keeps them)"
            )
        elif cache.misses == misses and cache.hits > hits:
            self._finish(f"the layer cache serves the training batches now: {self._counts(cache)}")
        elif self.clock() >= self.next_report:
            self.next_report = self.clock() + REPORT_EVERY_S
            self._say(f"filling the layer cache: {self.docs} training docs so far, {self._counts(cache)}")

    def _start(self, cache: LayerCache) -> None:
        self.started = True
        self.next_report = self.clock() + REPORT_EVERY_S
        self._say(
            "the frozen biLM runs once over each training sentence and caches its layers (cache_size_mb "
            f"{_mb(cache.max_bytes)}): the first epoch is the slow one, later ones read the cache; progress "
            f"follows every {REPORT_EVERY_S:.0f} s"
        )

    def _counts(self, cache: LayerCache) -> str:
        return (
            f"{cache.misses} segments computed, {cache.hits} read from the cache "
            f"({_mb(cache.nbytes)} of {_mb(cache.max_bytes)} MB)"
        )

    def _finish(self, message: str) -> None:
        self.done = True
        self._say(message)

    def _say(self, message: str) -> None:
        if LOGGER.level == logging.NOTSET:  # spaCy's logger passes only warnings; these are meant to be seen
            LOGGER.setLevel(logging.INFO)
        LOGGER.info("%s: %s", self.component, message)


def _mb(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:.0f}"
