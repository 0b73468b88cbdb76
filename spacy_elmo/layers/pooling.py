"""Pooling a doc's token vectors into one vector, safe for docs of no tokens.

thinc's ``reduce_max``, ``reduce_first`` and ``reduce_last`` refuse a sequence of
length 0 ("all sequence lengths must be > 0"), so spaCy's ``TextCatReduce`` with
any of them fails on a batch that mixes an empty text with others.
``zeros_for_empty`` runs a reduction on the docs that have tokens and gives the
empty ones zeros, as ``reduce_mean`` already does; the docs with tokens get
exactly what the reduction alone gives them.
"""

from typing import Callable, Tuple, cast

from thinc.api import Model
from thinc.types import Floats2d, Ragged

PoolModel = Model[Ragged, Floats2d]


def zeros_for_empty(reduction: PoolModel) -> PoolModel:
    return Model(f"{reduction.name}_or_zeros", _forward, layers=[reduction])


def _forward(model: PoolModel, Xr: Ragged, is_train: bool) -> Tuple[Floats2d, Callable]:
    reduction = model.layers[0]
    lengths = Xr.lengths
    has_tokens = lengths > 0
    width = cast(Floats2d, Xr.dataXd).shape[1]
    Y = model.ops.alloc2f(len(lengths), width)
    if not has_tokens.any():  # thinc's reductions lose the width of data with no rows
        return Y, lambda dY: Ragged(model.ops.alloc2f(0, width), lengths)
    # Empty docs own no rows of the data, so the data stays as it is.
    pooled, backprop_pooled = reduction(Ragged(Xr.dataXd, lengths[has_tokens]), is_train)
    Y[has_tokens] = pooled

    def backprop(dY: Floats2d) -> Ragged:
        d_present = backprop_pooled(model.ops.as_contig(dY[has_tokens]))
        return Ragged(d_present.data, lengths)

    return Y, backprop
