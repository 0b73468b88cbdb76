"""Held-out figures of a biLM: exact dev NLL, perplexities (or a vmf head's
losses), and the warning for text mostly outside the vocabulary."""

import math
from typing import Dict, Optional, Tuple

from ..bilm.language_model import BidirectionalLM
from ..bilm.lm_head import NORMALISED_KINDS
from .data import TrainingData

# Sentences per batch when computing dev perplexity.
EVAL_BATCH_SENTENCES = 64
# Above this share of <UNK> words, a perplexity says little about the text: say so.
UNKNOWN_RATE_WARNING = 0.10


def dev_nll(lm: BidirectionalLM, data: TrainingData) -> Tuple[float, float, int]:
    """Exact summed NLL of the dev sentences (full normalisation, no dropout)."""
    was_training = lm.training
    lm.eval()
    forward = backward = 0.0
    count = 0
    order = sorted(range(len(data.dev)), key=lambda i: len(data.dev[i]))
    for start in range(0, len(order), EVAL_BATCH_SENTENCES):
        batch = data.batch([data.dev[i] for i in order[start : start + EVAL_BATCH_SENTENCES]])
        f, b, n = lm.exact_nll(*batch)
        forward, backward, count = forward + f, backward + b, count + n
    lm.train(was_training)
    return forward, backward, count


def perplexity_of(mean_loss: float) -> float:
    """exp of a mean loss; inf where that overflows (a diverging run's loss of 710 nats or more)."""
    try:
        return math.exp(mean_loss)
    except OverflowError:
        return math.inf


def perplexities(forward: float, backward: float, count: int) -> Dict[str, float]:
    return {
        "forward": perplexity_of(forward / count),
        "backward": perplexity_of(backward / count),
        # exp of the mean loss: the geometric mean of the two.
        "mean": perplexity_of((forward + backward) / (2 * count)),
        "predictions_per_direction": count,
    }


def held_out_losses(forward: float, backward: float, count: int) -> Dict[str, float]:
    """A vmf head's figures: mean losses per prediction (it has no word probabilities, so no perplexity)."""
    return {
        "forward_loss": forward / count,
        "backward_loss": backward / count,
        "mean_loss": (forward + backward) / (2 * count),
        "predictions_per_direction": count,
    }


def held_out_figures(kind: str, figures: Tuple[float, float, int]) -> Dict[str, float]:
    """Perplexities for a head with word probabilities, mean losses for one without."""
    return (perplexities if kind in NORMALISED_KINDS else held_out_losses)(*figures)


def dev_record(kind: str, step: int, figures: Tuple[float, float, int]) -> Dict[str, float]:
    """The metrics.jsonl record of one dev evaluation."""
    if kind not in NORMALISED_KINDS:
        losses = held_out_losses(*figures)
        return {
            "step": step,
            "dev_loss": losses["mean_loss"],
            "dev_forward_loss": losses["forward_loss"],
            "dev_backward_loss": losses["backward_loss"],
        }
    ppl = perplexities(*figures)
    return {
        "step": step,
        "dev_perplexity": ppl["mean"],
        "dev_forward_perplexity": ppl["forward"],
        "dev_backward_perplexity": ppl["backward"],
    }


def unknown_rate_warning(rate: float, what: str) -> Optional[str]:
    if rate <= UNKNOWN_RATE_WARNING:
        return None
    return (
        f"{rate:.1%} of the words of {what} are outside the biLM's vocabulary and scored as <UNK>: "
        "the perplexity mostly measures how well <UNK> is predicted, not the text"
    )
