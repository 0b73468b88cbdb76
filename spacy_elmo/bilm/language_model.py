"""The training objective: forward and backward LM losses with one shared softmax.

For a sentence ``<S> w_1 .. w_n </S>`` (positions 0..n+1) the forward LM's top
state at position t predicts the word at t+1 and the backward LM's state at t
predicts the word at t-1: n+1 predictions each way. Every sentence starts
from zero state, as stateless inference does.
"""

from typing import Tuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .elmo_bilm import ElmoBiLM
from .lm_head import LmHead, VmfHead


class BidirectionalLM(nn.Module):
    def __init__(self, bilm: ElmoBiLM, head: LmHead):
        super().__init__()
        self.bilm = bilm
        self.head = head

    def top_states(self, type_chars: Tensor, type_index: Tensor, lengths: Tensor, dropout: float = 0.0) -> Tensor:
        """``(B, T, 2P)`` top-layer ``[forward; backward]`` states.

        ``type_chars (U, max_chars)`` holds the char ids of the batch's distinct
        tokens and ``type_index (B, T)`` says which one stands at each
        position: the char CNN runs once per distinct token.
        """
        _, layers, _ = self.bilm.contextual(type_chars, type_index, lengths, dropout=dropout)
        top = layers[-1].transpose(0, 1)
        return F.dropout(top, dropout) if dropout else top

    def forward(
        self, type_chars: Tensor, type_index: Tensor, word_ids: Tensor, lengths: Tensor, dropout: float = 0.0
    ) -> Tuple[Tensor, Tensor, int]:
        """Summed negative log-likelihoods ``(forward, backward, predictions per direction)``.

        ``word_ids (B, T)`` are vocabulary ids of every position, boundaries
        included; ``lengths`` count them. The head's training loss is used
        (approximate for the sampled softmax); see ``exact_nll`` for evaluation.
        """
        hidden, targets = self._predictions(type_chars, type_index, word_ids, lengths, dropout)
        nll = self.head(hidden, targets)
        n = targets.shape[0] // 2
        return nll[:n].sum(), nll[n:].sum(), self._scored(targets[:n])

    @torch.no_grad()
    def exact_nll(
        self, type_chars: Tensor, type_index: Tensor, word_ids: Tensor, lengths: Tensor
    ) -> Tuple[float, float, int]:
        """As ``forward``, with the exact (fully normalised) softmax and no dropout;
        for a head without word probabilities (vmf), its own loss."""
        hidden, targets = self._predictions(type_chars, type_index, word_ids, lengths, 0.0)
        n = targets.shape[0] // 2
        if isinstance(self.head, VmfHead):  # no word probabilities
            losses = self.head(hidden.float(), targets)
            return float(losses[:n].sum()), float(losses[n:].sum()), self._scored(targets[:n])
        log_probs = self.head.target_log_probs(hidden, targets)
        return -float(log_probs[:n].sum()), -float(log_probs[n:].sum()), n

    def _scored(self, targets: Tensor) -> int:
        """Predictions that count: all, or for a vmf head those whose word has a vector
        (the same words in both directions: each sentence's words plus one boundary)."""
        if isinstance(self.head, VmfHead):
            return int(self.head.has_target(targets).sum())
        return int(targets.shape[0])

    def _predictions(self, type_chars, type_index, word_ids, lengths, dropout):
        device = self.bilm.device
        type_chars, type_index = type_chars.to(device), type_index.to(device)
        word_ids, lengths = word_ids.to(device), lengths.to(device)
        top = self.top_states(type_chars, type_index, lengths, dropout)
        P = top.shape[-1] // 2
        # mask[b, t]: position t+1 is real, so t -> t+1 (forward) and t+1 -> t (backward) exist.
        steps = torch.arange(top.shape[1] - 1, device=device)
        mask = steps.unsqueeze(0) + 1 < lengths.unsqueeze(1)
        forward_hidden = top[:, :-1, :P][mask]
        backward_hidden = top[:, 1:, P:][mask]
        hidden = torch.cat([forward_hidden, backward_hidden])
        targets = torch.cat([word_ids[:, 1:][mask], word_ids[:, :-1][mask]])
        return hidden, targets
