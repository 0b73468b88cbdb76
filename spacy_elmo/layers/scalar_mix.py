"""The task-specific scalar mix (paper eq. 2): ``gamma * sum_j softmax(s)_j * h_j``.

``List[Floats3d] -> List[Floats2d]``: each doc's ``(L+1, n, 2P)`` layers become
``(n, 2P)``. s starts at 0 (an average of the layers) and gamma at 1. Options:
per-token layer norm of each layer before mixing, dropout on the output,
layer dropout (whole layers dropped from the softmax during training), and an
L2 penalty on s that pulls the weights toward the equal mix (paper sec. 3.2).
"""

from itertools import accumulate
from typing import Callable, List, Optional, Tuple

from thinc.api import Model, get_array_module
from thinc.types import Floats1d, Floats2d, Floats3d

from ..errors import ElmoError

MixModel = Model[List[Floats3d], List[Floats2d]]
LAYER_NORM_EPS = 1e-6


def build_scalar_mix(
    n_layers: Optional[int] = None,
    width: Optional[int] = None,
    layer_norm: bool = False,
    dropout: float = 0.0,
    layer_dropout: float = 0.0,
    l2: float = 0.0,
) -> MixModel:
    for name, rate in (("dropout", dropout), ("layer_dropout", layer_dropout)):
        if not 0.0 <= rate < 1.0:
            raise ElmoError(f"scalar mix {name} must be in [0, 1), got {rate}")
    if l2 < 0:
        raise ElmoError(f"scalar mix l2 must be >= 0, got {l2}")
    return Model(
        "elmo_scalar_mix",
        mix_forward,
        init=mix_init,
        dims={"nL": n_layers, "nO": width},
        params={"s": None, "gamma": None},
        attrs={
            "layer_norm": layer_norm,
            # Not "dropout_rate": spaCy's update() sets every node's
            # "dropout_rate" to [training] dropout, which would silently
            # replace the rate configured for this listener.
            "mix_dropout": dropout,
            "layer_dropout": layer_dropout,
            "l2": l2,
            # Whether backprop computes d(layers): only needed when the biLM learns.
            "input_gradient": True,
        },
    )


def mix_init(model: MixModel, X: Optional[List[Floats3d]] = None, Y=None) -> None:
    if X and not model.has_dim("nL"):
        model.set_dim("nL", X[0].shape[0])
    if X and not model.has_dim("nO"):
        model.set_dim("nO", X[0].shape[2])
    if not model.has_dim("nL"):
        raise ElmoError("the ELMo scalar mix does not know how many layers the biLM has")
    model.set_param("s", model.ops.alloc1f(model.get_dim("nL")))
    model.set_param("gamma", model.ops.asarray1f([1.0]))


def mix_weights(model: MixModel, keep: Optional[Floats1d] = None) -> Floats1d:
    """softmax(s), over the kept layers only when layer dropout chose some."""
    s = model.get_param("s")
    e = model.ops.xp.exp(s - s.max())
    if keep is not None:
        e = e * keep
    return e / e.sum()


def mix_forward(model: MixModel, Xs: List[Floats3d], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    """The whole batch's tokens mixed at once (one set of kernels per batch, not per doc:
    on a GPU each is a launch), then split back into docs."""
    ops, xp = model.ops, model.ops.xp
    n_layers = model.get_dim("nL")
    _check_shapes(Xs, n_layers, model.maybe_get_dim("nO"))
    keep = None
    if is_train and model.attrs["layer_dropout"] > 0:
        keep = ops.asarray1f(ops.xp.random.uniform(size=n_layers) >= model.attrs["layer_dropout"])
        if not keep.any():  # always keep one layer
            keep[int(ops.xp.random.randint(n_layers))] = 1.0
    weights = mix_weights(model, keep)
    gamma = model.get_param("gamma")[0]
    rate = model.attrs["mix_dropout"] if is_train else 0.0
    if not Xs:
        return [], lambda dYs: []
    ends = list(accumulate(X.shape[1] for X in Xs))[:-1]  # where each doc ends
    X = ops.asarray3f(Xs[0] if len(Xs) == 1 else xp.concatenate(Xs, axis=1))  # float32 (stored may be float16)
    inv_std = None
    if model.attrs["layer_norm"]:
        X, inv_std = _layer_norm(xp, X)
    mixed = xp.tensordot(weights, X, axes=(0, 0))  # (all tokens, width)
    Y = gamma * mixed
    mask = ops.get_dropout_mask(Y.shape, rate) if rate else None
    if mask is not None:
        Y = Y * mask

    def backprop(dYs: List[Floats2d]) -> List[Floats3d]:
        dY = dYs[0] if len(dYs) == 1 else xp.concatenate(dYs, axis=0)
        if mask is not None:
            dY = dY * mask
        d_gamma = (dY * mixed).sum(keepdims=True).reshape((1,))  # stays on the device: no sync
        d_mixed = gamma * dY
        d_weights = xp.tensordot(X, d_mixed, axes=([1, 2], [0, 1]))
        d_s = weights * (d_weights - (weights * d_weights).sum())
        if model.attrs["l2"]:
            # gradient of l2 * ||s||^2: keeps the mix near the plain average
            d_s = d_s + 2.0 * model.attrs["l2"] * model.get_param("s")
        model.inc_grad("s", d_s.astype("float32"))
        model.inc_grad("gamma", d_gamma.astype("float32"))
        if not model.attrs["input_gradient"]:
            return []
        dX = xp.multiply.outer(weights, d_mixed)  # (L+1, all tokens, width)
        if inv_std is not None:
            dX = _layer_norm_backward(dX, X, inv_std)
        return xp.split(dX, ends, axis=1)

    return xp.split(Y, ends, axis=0), backprop


def _check_shapes(Xs: List[Floats3d], n_layers: int, width: Optional[int]) -> None:
    for X in Xs:
        if X.shape[0] != n_layers:
            raise ElmoError(f"the ELMo scalar mix expects {n_layers} layers, got an input with {X.shape[0]}")
        if width is not None and X.shape[2] != width:
            raise ElmoError(f"the ELMo scalar mix expects vectors of width {width}, got an input of width {X.shape[2]}")


def _layer_norm(xp, X: Floats3d):
    """Normalise every token vector of every layer (no learned scale or shift)."""
    # xp.mean, not X.mean: thinc's array stubs declare no mean() for 3d arrays.
    centered = X - xp.mean(X, axis=-1, keepdims=True)
    inv_std = 1.0 / xp.sqrt(xp.mean(centered**2, axis=-1, keepdims=True) + LAYER_NORM_EPS)
    return centered * inv_std, inv_std


def _layer_norm_backward(d_normed: Floats3d, normed: Floats3d, inv_std: Floats3d) -> Floats3d:
    xp = get_array_module(d_normed)
    return inv_std * (
        d_normed
        - xp.mean(d_normed, axis=-1, keepdims=True)
        - normed * xp.mean(d_normed * normed, axis=-1, keepdims=True)
    )
