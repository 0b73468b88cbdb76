"""Warm start: continue from an exported biLM directory instead of from zero.

``paths.init_dir`` names a directory with ``options.json`` and
``weights.hdf5`` (a ``pretrain`` output, the package's bundled biLM, or
published bilm-tf files) and, optionally, the ``vocab.txt`` and
``softmax.hdf5`` that ``pretrain`` writes beside them. The char CNN and the
LSTMs always start from the directory's weights. The LM head starts from the
directory's softmax when both files are there and the kinds agree: every word
the new vocabulary shares with the old one keeps its row (for the adaptive
softmax: when the word stays in the same cluster, whose projection is kept
too). The new vocabulary is, unless ``paths.vocab`` gives one, the old one
extended by the new text's frequent words (appended, so no shared word moves).

``warm_start.projection_dim`` widens the starting biLM's projection (the
token vectors and the LSTM outputs) without changing what it computes: in
every matrix the old units keep their weights and give the new inputs zero
weight, and the new units start from fresh weights, so the new dimensions
carry random projections of the old ones until training makes them useful.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy
import torch

from ..bilm import ElmoBiLM, ElmoOptions
from ..errors import ElmoFileNotFoundError, PretrainDataError
from ..formats.bilm_dir import OPTIONS_NAME, WEIGHTS_NAME, check_bilm_dir
from .outputs import SOFTMAX_NAME, VOCAB_NAME, read_softmax_arrays, read_softmax_settings
from .vocab import SPECIAL_TOKENS, Vocabulary

# An adaptive softmax tail's projection (its rows are units, not words).
_TAIL_PROJECTION = re.compile(r"^softmax\.tail\.\d+\.0\.weight$")


@dataclass
class WarmStart:
    """What an init directory holds: the biLM files, and the softmax with its vocabulary if present."""

    directory: Path
    vocab: Optional[Vocabulary] = None
    # softmax.hdf5's settings ("kind" and the kind's own, e.g. "cutoffs"), read once here: the transfer needs them too.
    softmax_settings: Optional[Dict[str, Any]] = None
    softmax_arrays: Optional[Dict[str, numpy.ndarray]] = None

    @property
    def softmax_kind(self) -> Optional[str]:
        return None if self.softmax_settings is None else self.softmax_settings["kind"]

    @property
    def options_file(self) -> Path:
        return self.directory / OPTIONS_NAME

    @property
    def weight_file(self) -> Path:
        return self.directory / WEIGHTS_NAME


def read_init_dir(directory) -> WarmStart:
    """Check the directory's files and read its softmax and vocabulary; errors name the file and what differs."""
    directory = Path(directory)
    try:
        check_bilm_dir(directory, "paths.init_dir")
    except ElmoFileNotFoundError as err:
        raise PretrainDataError(str(err)) from err
    vocab_file, softmax_file = directory / VOCAB_NAME, directory / SOFTMAX_NAME
    if not vocab_file.is_file() and not softmax_file.is_file():
        return WarmStart(directory)  # the biLM alone: the head starts fresh
    for present, absent in ((vocab_file, softmax_file), (softmax_file, vocab_file)):
        if present.is_file() and not absent.is_file():
            raise PretrainDataError(
                f"paths.init_dir: {present} is there but {absent} is missing; the softmax rows mean nothing "
                f"without their words (remove {present.name} to start the head afresh)"
            )
    vocab = Vocabulary.from_file(vocab_file)
    settings = read_softmax_settings(softmax_file)
    arrays = read_softmax_arrays(softmax_file)
    rows = softmax_rows(settings["kind"], arrays, settings)
    if rows is not None and rows != len(vocab):
        raise PretrainDataError(
            f"paths.init_dir: {softmax_file} scores {rows} words but {vocab_file} lists {len(vocab)}; "
            "they come from different runs"
        )
    return WarmStart(directory, vocab, settings, arrays)


def warm_start_summary(warm: WarmStart, head_kind: str, kept: int, vocab_size: int) -> str:
    """What a warm start took from ``warm``: always the biLM; the LM head's rows only from a head of this run's kind."""
    start = f"warm start from {warm.directory}: its biLM weights"
    if warm.softmax_kind is None:
        return (
            f"{start}; it has no LM head ({VOCAB_NAME} and {SOFTMAX_NAME}), so this run trains the "
            f"LM head ({head_kind}) from scratch"
        )
    if warm.softmax_kind != head_kind:
        return (
            f"{start}; its LM head is {warm.softmax_kind} and this run's is {head_kind}, so this run "
            "trains the LM head from scratch"
        )
    rest = "" if kept == vocab_size else " (the other words' rows start fresh)"
    return f"{start}, and its LM head's rows for {kept:,} of this run's {vocab_size:,} words{rest}"


def softmax_rows(kind: str, arrays: Dict[str, numpy.ndarray], settings: Dict) -> Optional[int]:
    """How many words a saved head scores (None when its arrays cannot say)."""
    if kind in ("full", "sampled"):
        return int(arrays["weight"].shape[0])
    if kind == "vmf":
        return int(arrays["targets"].shape[0])
    if kind == "adaptive":
        cutoffs = settings["cutoffs"]
        tails = sorted(name for name in arrays if name.startswith("softmax.tail.") and name.endswith(".1.weight"))
        if len(tails) != len(cutoffs):
            return None
        return int(cutoffs[-1] + arrays[tails[-1]].shape[0])
    return None


def extended_vocab(
    old: Vocabulary, types: Sequence[str], counts: numpy.ndarray, min_count: int, max_size: int
) -> Vocabulary:
    """``old`` in its order, then the new text's words it lacks, most frequent first, up to ``max_size``."""
    words = list(old.words)
    known = set(words)
    for index in numpy.argsort(-counts, kind="stable"):
        if len(words) >= max_size or counts[index] < min_count:
            break
        if types[index] not in known and types[index] not in SPECIAL_TOKENS:
            words.append(types[index])
    return Vocabulary(words)


def _cluster_bounds(cutoffs: Sequence[int], vocab_size: int) -> list:
    return [0, *cutoffs, vocab_size]


def widened(fresh: torch.Tensor, old: torch.Tensor, input_axis: int) -> torch.Tensor:
    """``old`` in the leading block of ``fresh``'s shape; the old outputs give the new inputs zero weight.

    ``input_axis`` is the axis a matrix multiplies its input along (0 for the biLM's
    ``x @ W`` weights, 1 for ``torch.nn.Linear``); vectors only grow new entries.
    """
    if fresh.shape == old.shape:
        return old.clone()
    if fresh.dim() != old.dim() or any(n < o for n, o in zip(fresh.shape, old.shape)):
        raise PretrainDataError(f"cannot widen a weight of shape {tuple(old.shape)} to {tuple(fresh.shape)}")
    out = fresh.clone()
    out[tuple(slice(0, n) for n in old.shape)] = old
    if old.dim() == 2:
        new_inputs = [slice(0, n) for n in old.shape]
        new_inputs[input_axis] = slice(old.shape[input_axis], None)
        out[tuple(new_inputs)] = 0.0
    return out


def widened_bilm(bilm: ElmoBiLM, options: ElmoOptions) -> ElmoBiLM:
    """``bilm`` itself if its sizes are ``options``'; else a wider biLM that computes what it did."""
    if bilm.options.projection_dim == options.projection_dim:
        return bilm
    wide = ElmoBiLM(options)
    fresh, old = wide.state_dict(), bilm.state_dict()
    wide.load_state_dict({name: widened(fresh[name], old[name], input_axis=0) for name in fresh})
    return wide


def transfer_head(head: torch.nn.Module, warm: WarmStart, vocab: Vocabulary) -> int:
    """Copy the saved head's rows into ``head`` for the words both vocabularies share; returns how many.

    A head widened with the biLM (``warm_start.projection_dim``) keeps its old
    weights too, giving the new dimensions zero weight (see ``widened``).
    """
    if warm.softmax_arrays is None or warm.vocab is None or warm.softmax_kind != head.kind:
        return 0
    state = head.state_dict()
    # float32, whatever the file holds (a shipped biLM's softmax is float16).
    arrays = {name: torch.from_numpy(numpy.asarray(a, dtype=numpy.float32)) for name, a in warm.softmax_arrays.items()}
    arrays = {name: _widened_rows(name, state[name], a) if name in state else a for name, a in arrays.items()}
    old_ids = numpy.array([warm.vocab.index.get(word, -1) for word in vocab.words])
    shared = numpy.flatnonzero(old_ids >= 0)
    with torch.no_grad():
        if head.kind in ("full", "sampled"):
            state["weight"][shared] = arrays["weight"][old_ids[shared]]
            state["bias"][shared] = arrays["bias"][old_ids[shared]]
            kept = len(shared)
        elif head.kind == "vmf":
            state["project.weight"].copy_(arrays["project.weight"])
            state["project.bias"].copy_(arrays["project.bias"])
            kept = len(shared)
        else:
            kept = _transfer_adaptive(state, arrays, head, warm, old_ids)
    head.load_state_dict(state)
    return kept


def _transfer_adaptive(state, arrays, head, warm: WarmStart, old_ids: numpy.ndarray) -> int:
    assert warm.vocab is not None and warm.softmax_settings is not None  # transfer_head checked them
    old_cutoffs = [int(c) for c in warm.softmax_settings["cutoffs"]]
    new_bounds = _cluster_bounds(head.cutoffs, head.vocab_size)
    old_bounds = _cluster_bounds(old_cutoffs, len(warm.vocab))
    kept = 0
    for cluster in range(len(new_bounds) - 1):
        if cluster >= len(old_bounds) - 1:
            break
        name = "softmax.head.weight" if cluster == 0 else f"softmax.tail.{cluster - 1}.1.weight"
        if cluster > 0:
            projection = f"softmax.tail.{cluster - 1}.0.weight"
            if state[projection].shape != arrays[projection].shape:
                continue
            state[projection].copy_(arrays[projection])
        new_start, new_end = new_bounds[cluster], new_bounds[cluster + 1]
        old_start, old_end = old_bounds[cluster], old_bounds[cluster + 1]
        ids = numpy.arange(new_start, new_end)
        stays = (old_ids[ids] >= old_start) & (old_ids[ids] < old_end)
        state[name][ids[stays] - new_start] = arrays[name][old_ids[ids[stays]] - old_start]
        kept += int(stays.sum())
    # The head's cluster rows score "the word is in cluster k": kept when the clusters are the same.
    n_clusters = len(new_bounds) - 2
    if len(old_bounds) == len(new_bounds) and n_clusters:
        short = new_bounds[1]
        state["softmax.head.weight"][short:] = arrays["softmax.head.weight"][old_bounds[1] :]
    return kept


def _widened_rows(name: str, fresh: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """A saved head weight at ``fresh``'s width. Rows that are words or clusters stay as many as
    saved (they are transferred by word); an adaptive tail's projection grows new units too."""
    if fresh.dim() != 2 or fresh.shape[1] == old.shape[1]:
        return old
    if _TAIL_PROJECTION.match(name):
        return widened(fresh, old, input_axis=1)
    return widened(fresh.new_zeros(old.shape[0], fresh.shape[1]), old, input_axis=1)
