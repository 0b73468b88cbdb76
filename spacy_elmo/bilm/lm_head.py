"""The language-model softmax over the word vocabulary, shared by both directions.

Four kinds (paper section 3.1 uses one softmax for the forward and backward LM):

* ``full``: every word's logit, exact.
* ``sampled``: bilm-tf's training approximation: the true word against
  ``n_samples`` negatives drawn from a log-uniform (Zipf) distribution over the
  frequency-sorted vocabulary, logits corrected by the log expected counts,
  accidental hits removed. Evaluation uses the full softmax of the same weights.
* ``adaptive``: Grave et al. (2017), ``torch.nn.AdaptiveLogSoftmaxWithLoss``:
  frequent words in a head, rare ones in smaller clusters. Exact probabilities.
* ``vmf``: continuous outputs (Kumar & Tsvetkov 2019; Li et al. 2019, ELMo-C):
  no softmax; the state is mapped to a vector that should point at the target
  word's pretrained vector, scored by the von Mises-Fisher negative
  log-likelihood. It has a loss, not word probabilities: no perplexity.

Every head maps ``hidden (N, P)`` and ``targets (N,)`` to per-example negative
log-likelihoods; ``target_log_probs`` gives the exact normalised values.
The vocabulary must be sorted by frequency (row 0 the most frequent).
"""

import math
from typing import Dict, List, Optional, Sequence, TypeVar, Union

import numpy
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..errors import ElmoOptionsError
from .tf_layout import host_array

SOFTMAX_KINDS = ("full", "sampled", "adaptive", "vmf")
# Heads that give word probabilities (and so a perplexity).
NORMALISED_KINDS = ("full", "sampled", "adaptive")
# Rows of logits computed at once in exact evaluation: bounds the (rows, V) buffer.
_EVAL_CHUNK = 1024


class FullSoftmax(nn.Module):
    kind = "full"

    def __init__(self, input_dim: int, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.weight = nn.Parameter(torch.empty(vocab_size, input_dim))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        nn.init.normal_(self.weight, 0.0, 1.0 / math.sqrt(input_dim))

    def forward(self, hidden: Tensor, targets: Tensor) -> Tensor:
        return F.cross_entropy(F.linear(hidden, self.weight, self.bias), targets, reduction="none")

    def target_log_probs(self, hidden: Tensor, targets: Tensor) -> Tensor:
        out = []
        for h, t in zip(hidden.split(_EVAL_CHUNK), targets.split(_EVAL_CHUNK)):
            logits = F.linear(h.float(), self.weight.float(), self.bias.float())
            out.append(logits.log_softmax(-1).gather(1, t.unsqueeze(1)).squeeze(1))
        return torch.cat(out) if out else hidden.new_zeros(0)

    def settings(self) -> Dict:
        return {}


class SampledSoftmax(FullSoftmax):
    kind = "sampled"
    log_expected: Tensor  # a buffer

    def __init__(self, input_dim: int, vocab_size: int, n_samples: int):
        super().__init__(input_dim, vocab_size)
        if n_samples < 1:
            raise ElmoOptionsError(f"sampled softmax: n_samples must be >= 1, got {n_samples}")
        # No point sampling more negatives than there are words: then train exactly.
        self.n_samples = min(int(n_samples), vocab_size)
        ranks = torch.arange(vocab_size, dtype=torch.float64)
        probs = (torch.log(ranks + 2) - torch.log(ranks + 1)) / math.log(vocab_size + 1)
        self.register_buffer("log_expected", torch.log(probs * self.n_samples).float(), persistent=False)

    def sample(self, device: torch.device) -> Tensor:
        """``n_samples`` ids, log-uniform over ranks: floor(exp(u log(V+1))) - 1."""
        u = torch.rand(self.n_samples, dtype=torch.float64, device=device)
        ids = torch.exp(u * math.log(self.vocab_size + 1)).floor().long() - 1
        return ids.clamp_(0, self.vocab_size - 1)

    def forward(self, hidden: Tensor, targets: Tensor) -> Tensor:
        if not self.training or self.n_samples >= self.vocab_size:
            return super().forward(hidden, targets)
        sampled = self.sample(hidden.device)
        log_expected = self.log_expected.to(hidden.device)
        true_logits = (hidden * self.weight[targets]).sum(-1) + self.bias[targets] - log_expected[targets]
        sampled_logits = F.linear(hidden, self.weight[sampled], self.bias[sampled] - log_expected[sampled])
        # A negative that is the true word is not a negative.
        sampled_logits = sampled_logits.masked_fill(sampled.unsqueeze(0) == targets.unsqueeze(1), float("-inf"))
        logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)
        return -logits.log_softmax(-1)[:, 0]

    def settings(self) -> Dict:
        return {"n_samples": self.n_samples}


class AdaptiveSoftmax(nn.Module):
    kind = "adaptive"

    def __init__(self, input_dim: int, vocab_size: int, cutoffs: Sequence[int], div_value: float):
        super().__init__()
        self.vocab_size = vocab_size
        # Cutoffs at or beyond the vocabulary size are meaningless for a small vocabulary.
        self.cutoffs: List[int] = [int(c) for c in cutoffs if 0 < int(c) < vocab_size]
        if sorted(set(self.cutoffs)) != self.cutoffs:
            raise ElmoOptionsError(f"adaptive softmax: cutoffs must increase strictly, got {list(cutoffs)}")
        self.div_value = float(div_value)
        if not self.cutoffs:
            # One cluster: the adaptive softmax is the full softmax.
            self.cutoffs = [vocab_size - 1] if vocab_size > 1 else []
        if not self.cutoffs:
            raise ElmoOptionsError("adaptive softmax: the vocabulary needs at least 2 words")
        for cluster in range(1, len(self.cutoffs) + 1):
            width = int(input_dim // (self.div_value**cluster))
            if width < 1:
                raise ElmoOptionsError(
                    f"adaptive softmax: with input width {input_dim} and div_value {self.div_value}, "
                    f"cluster {cluster} would have width 0; use fewer cutoffs or a smaller div_value"
                )
        self.softmax = nn.AdaptiveLogSoftmaxWithLoss(input_dim, vocab_size, self.cutoffs, div_value=self.div_value)

    def forward(self, hidden: Tensor, targets: Tensor) -> Tensor:
        return -self.softmax(hidden, targets).output

    def target_log_probs(self, hidden: Tensor, targets: Tensor) -> Tensor:
        if not len(targets):
            return hidden.new_zeros(0)
        return self.softmax(hidden.float(), targets).output

    def settings(self) -> Dict:
        return {"cutoffs": self.cutoffs, "div_value": self.div_value}


def log_bessel_iv(order: float, kappa: Tensor) -> Tensor:
    """``log I_order(kappa)`` by the uniform asymptotic (Debye) expansion with its first
    correction term (Abramowitz & Stegun 9.7.7), differentiable where torch has no Bessel
    function of any order: within 1e-4 of the exact value for the orders of word vectors
    (m/2 - 1 = 149 for m = 300; checked against mpmath in the tests)."""
    z = kappa / order
    root = torch.sqrt(1 + z * z)
    eta = root + torch.log(z / (1 + root))
    t = 1 / root
    u1 = (3 * t - 5 * t**3) / 24
    return -0.5 * math.log(2 * math.pi * order) + order * eta - 0.5 * torch.log(root) + torch.log1p(u1 / order)


class VmfHead(nn.Module):
    """Continuous outputs: ``e_hat = W h``; the loss of a target with unit vector
    ``e`` is the vMF NLL ``-log C_m(|e_hat|) - e_hat . e`` plus ``l1 * |e_hat|``
    (Kumar & Tsvetkov 2019, eq. 6 with their first regulariser). Targets whose
    word has no vector (an all-zero row) are left out of the loss."""

    kind = "vmf"
    targets: Tensor  # a buffer

    def __init__(self, input_dim: int, vocab_size: int, target_vectors: Tensor, l1: float):
        super().__init__()
        if target_vectors.dim() != 2 or target_vectors.shape[0] != vocab_size:
            raise ElmoOptionsError(
                f"vmf head: target vectors of shape {tuple(target_vectors.shape)} for a vocabulary of {vocab_size} words"
            )
        self.vocab_size, self.l1 = vocab_size, float(l1)
        self.dim = target_vectors.shape[1]
        if self.dim < 4:
            raise ElmoOptionsError(f"vmf head: target vectors need at least 4 dimensions, got {self.dim}")
        self.project = nn.Linear(input_dim, self.dim)
        norms = target_vectors.float().norm(dim=1, keepdim=True)
        # A persistent buffer: a checkpoint or softmax file is complete without the vectors' source.
        self.register_buffer("targets", target_vectors.float() / norms.clamp(min=1e-12))

    def has_target(self, targets: Tensor) -> Tensor:
        return self.targets[targets].abs().sum(-1) > 0

    def forward(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """Per-example losses; 0 for targets without a vector (see ``has_target``)."""
        predicted = self.project(hidden).float()
        kappa = predicted.norm(dim=-1).clamp(min=1e-6)
        order = self.dim / 2 - 1
        log_cm = order * torch.log(kappa) - (self.dim / 2) * math.log(2 * math.pi) - log_bessel_iv(order, kappa)
        target = self.targets[targets]
        loss = -log_cm - (predicted * target).sum(-1) + self.l1 * kappa
        return loss * self.has_target(targets)

    def settings(self) -> Dict:
        return {"l1": self.l1}


T = TypeVar("T")
LmHead = Union[FullSoftmax, AdaptiveSoftmax, VmfHead]  # SampledSoftmax is a FullSoftmax


def build_lm_head(
    kind: str,
    input_dim: int,
    vocab_size: int,
    *,
    n_samples: Optional[int] = None,
    cutoffs: Sequence[int] = (),
    div_value: Optional[float] = None,
    target_vectors=None,
    l1: Optional[float] = None,
) -> LmHead:
    """A head of ``kind`` with the settings that kind needs (no defaults here: they come from
    the pretraining config, or from the softmax file the head was saved to)."""
    if kind == "full":
        return FullSoftmax(input_dim, vocab_size)
    if kind == "sampled":
        return SampledSoftmax(input_dim, vocab_size, _needed(n_samples, "n_samples", kind))
    if kind == "adaptive":
        return AdaptiveSoftmax(input_dim, vocab_size, cutoffs, _needed(div_value, "div_value", kind))
    if kind == "vmf":
        if target_vectors is None:
            raise ElmoOptionsError("the vmf head needs target vectors (pretraining: paths.output_vectors)")
        return VmfHead(input_dim, vocab_size, torch.as_tensor(target_vectors), _needed(l1, "l1", kind))
    raise ElmoOptionsError(f"softmax kind must be one of {SOFTMAX_KINDS}, got {kind!r}")


def _needed(value: Optional[T], name: str, kind: str) -> T:
    if value is None:
        raise ElmoOptionsError(f"the {kind} softmax needs its setting {name}")
    return value


def head_arrays(head: nn.Module) -> Dict[str, numpy.ndarray]:
    """The head's parameters as named float32 arrays (for an HDF5 file: no pickle)."""
    return {name: host_array(t, copy=False) for name, t in head.state_dict().items()}


def load_head_arrays(head: nn.Module, arrays: Dict[str, numpy.ndarray], source: str) -> None:
    expected = head.state_dict()
    missing = sorted(set(expected) - set(arrays))
    if missing:
        raise ElmoOptionsError(f"{source}: softmax file lacks dataset(s) {missing}")
    for name, tensor in expected.items():
        if tuple(arrays[name].shape) != tuple(tensor.shape):
            raise ElmoOptionsError(
                f"{source}: softmax dataset {name!r} has shape {tuple(arrays[name].shape)}, "
                f"expected {tuple(tensor.shape)}"
            )
    head.load_state_dict({name: torch.from_numpy(numpy.asarray(a)) for name, a in arrays.items() if name in expected})
