"""Torch threads in forked processes: one, so that a fork can never hang.

A process forked after torch ran a parallel region on two or more threads (as
spaCy's ``nlp.pipe(n_process=N)`` does on Linux, where workers are forked from
a parent that has usually run the pipeline already) inherits the OpenMP
runtime's record of its thread team but not the threads: GNU libgomp is not
fork-safe, and the child's first parallel matmul waits forever at a barrier.
A child with one intra-op thread never starts a team, so it cannot hang; one
thread per worker is also what N processes sharing the cores want (torch sets
its DataLoader workers the same way). Resetting inside the child, at the fork
itself, covers every way of forking (spaCy's workers, a user's own
multiprocessing) before any code runs there; spawned processes start fresh and
need nothing.
"""

import os

import torch

_registered = False


def _one_thread() -> None:
    torch.set_num_threads(1)


def make_forks_safe() -> None:
    """From now on every child forked from this process (by spaCy's workers, a user's
    own multiprocessing, anything) starts with ``torch.set_num_threads(1)``; the parent
    is unchanged. Registered once per process (idempotent), when the first biLM is built
    (``ElmoBiLM.__init__``), not at import."""
    global _registered
    if not _registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_one_thread)
        _registered = True
