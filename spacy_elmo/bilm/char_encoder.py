"""The context-independent token encoder: char embedding -> CNN -> highway -> projection.

Layouts follow bilm-tf so weight files map onto parameters without surprises:
matrices are stored ``(in, out)`` and applied as ``x @ W``.
"""

from functools import partial
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .char_ids import N_CHARACTERS, PAD_CHAR, batch_char_ids
from .generation import TracksWeights, WeightsGeneration
from .kernels import packed_linear
from .lstm import FORGET_BIAS
from .options import ElmoOptions
from .precision import Precision
from .tf_layout import host_array, lstm_tf_arrays
from .token_encoder import LstmStacks

# Tokens per chunk in the CNN: bounds the (tokens x positions x filters)
# intermediate to a few tens of MB for the published sizes.
CNN_CHUNK_TOKENS = 256
# The padding character after the +1 shift.
PAD_ID = PAD_CHAR + 1


class InferenceWeights(NamedTuple):
    """What the encoder multiplies by: the parameters, or copies for int8/bf16 inference."""

    char_embed: Tensor
    conv_weights: List[Tensor]
    dense: Sequence[Callable[[Tensor], Tensor]]  # the highway layers, then the projection
    trains: bool = False  # the forward's training-or-inference decision (ElmoBiLM.runs_training)


class CharEncoder(TracksWeights):
    """bilm-tf's token encoder (a ``TokenEncoder``): a token's characters -> its vector."""

    # bilm-tf's LSTM adds 1.0 to its forget gates at run time (not in the weights file).
    forget_bias = FORGET_BIAS

    def __init__(self, options: ElmoOptions, generation: Optional[WeightsGeneration] = None) -> None:
        super().__init__()
        # Shared with the biLM's other modules: the packed copies below are keyed on it.
        self.generation = generation or WeightsGeneration()
        self.filters = list(options.filters)
        self.char_dim = options.char_dim
        self.max_chars = options.max_characters_per_token
        self.activation = options.activation
        self.n_filters = n_filters = options.n_filters
        # Row 0 is the all-zero "no token" row (the file has the other 261).
        self.char_embed = nn.Parameter(torch.empty(N_CHARACTERS, options.char_dim))
        # One (width * char_dim, n) matrix per width, rows ordered (width, char_dim)
        # like bilm-tf's (1, width, char_dim, n) filters.
        self.conv_weights = nn.ParameterList(
            [nn.Parameter(torch.empty(width * options.char_dim, n)) for width, n in self.filters]
        )
        self.conv_biases = nn.ParameterList([nn.Parameter(torch.empty(n)) for _, n in self.filters])
        # Highway transform and carry fused side by side: (F, 2F) = [W_transform | W_carry].
        self.highway_weights = nn.ParameterList(
            [nn.Parameter(torch.empty(n_filters, 2 * n_filters)) for _ in range(options.n_highway)]
        )
        self.highway_biases = nn.ParameterList(
            [nn.Parameter(torch.empty(2 * n_filters)) for _ in range(options.n_highway)]
        )
        self.proj_weight = nn.Parameter(torch.empty(n_filters, options.projection_dim))
        self.proj_bias = nn.Parameter(torch.empty(options.projection_dim))
        # "int8": the highway and projection layers run quantized copies at inference;
        # "bf16": those and the CNN run bfloat16 copies (fp32 sums, bias and activations).
        self.precision = Precision.FP32
        self._kernels: Optional[Tuple[tuple, InferenceWeights]] = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Fresh weights for pretraining, initialised as bilm-tf does."""
        with torch.no_grad():
            nn.init.uniform_(self.char_embed, -1.0, 1.0)
            self.char_embed[0].zero_()
            for (width, _), weight, bias in zip(self.filters, self.conv_weights, self.conv_biases):
                if self.activation == "relu":
                    nn.init.uniform_(weight, -0.05, 0.05)
                else:
                    nn.init.normal_(weight, 0.0, (1.0 / (width * self.char_dim)) ** 0.5)
                bias.zero_()
            n_filters = self.n_filters
            for weight, bias in zip(self.highway_weights, self.highway_biases):
                nn.init.normal_(weight, 0.0, (1.0 / n_filters) ** 0.5)
                bias.zero_()
                bias[n_filters:] = -2.0  # TF highway: carry bias starts at -2
            nn.init.normal_(self.proj_weight, 0.0, (1.0 / n_filters) ** 0.5)
            self.proj_bias.zero_()
        self.generation.bump()

    def set_precision(self, precision: Precision) -> None:
        """Resolved where it was chosen (``ElmoBiLM.set_precision``)."""
        self.precision = precision
        self._kernels = None

    def weights_key(self) -> tuple:
        """Changes whenever the weights (or how they run) change."""
        return (self.precision, self.generation.value)

    def batch_ids(self, sentences: Sequence[Sequence[str]]) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """``(char ids, lengths)`` of token lists, the markers included: what ``forward`` reads."""
        return batch_char_ids(sentences, self.max_chars)

    def spec(self) -> None:
        """Nothing beside the options: they say all there is of a char CNN."""
        return None

    def named_arrays(self, stacks: LstmStacks) -> Dict[str, numpy.ndarray]:
        """The biLM's weights as bilm-tf's datasets (what weights.hdf5 holds)."""
        return {**self.tf_arrays(), **lstm_tf_arrays(stacks)}

    def restore_legacy_bias(self, stacks: LstmStacks, spec: Any) -> bool:
        """Every save of a bilm-tf biLM holds its bias as bilm-tf does: nothing to mend."""
        return False

    def forward(self, char_ids: Tensor, trains: bool = False) -> Tensor:
        """``(n_tokens, max_chars)`` ids -> ``(n_tokens, projection_dim)`` vectors; ``trains``: the
        biLM's one training-or-inference decision for this forward (``ElmoBiLM.runs_training``)."""
        weights = self._inference_weights(trains)
        features = self._convolve_by_length(char_ids, weights)
        dense = weights.dense
        n_filters = self.n_filters
        for highway in dense[:-1]:
            both = highway(features)
            transform = torch.relu(both[:, :n_filters])
            carry = torch.sigmoid(both[:, n_filters:])
            # carry * transform + (1 - carry) * x, in fewer passes
            features = torch.addcmul(features, carry, transform - features)
        return dense[-1](features)

    def _inference_weights(self, trains: bool = False) -> InferenceWeights:
        """The weights this call runs: the parameters (fp32, and always when training), or
        int8/bf16 copies rebuilt when the weights change."""
        pairs = list(zip(self.highway_weights, self.highway_biases)) + [(self.proj_weight, self.proj_bias)]
        if self.precision is Precision.FP32 or trains:
            exact = [partial(torch.addmm, bias, mat2=weight) for weight, bias in pairs]
            return InferenceWeights(self.char_embed, list(self.conv_weights), exact, trains)
        key = self.weights_key()
        if self._kernels is None or self._kernels[0] != key:
            dense = [packed_linear(weight, bias, self.precision) for weight, bias in pairs]
            if self.precision is Precision.BF16:
                weights = InferenceWeights(
                    self.char_embed.detach().bfloat16(), [w.detach().bfloat16() for w in self.conv_weights], dense
                )
            else:  # int8: the CNN stays fp32 (it runs once per distinct token)
                weights = InferenceWeights(self.char_embed, list(self.conv_weights), dense)
            self._kernels = (key, weights)
        return self._kernels[1]

    def _convolve_by_length(self, char_ids: Tensor, weights: Optional[InferenceWeights] = None) -> Tensor:
        """The CNN features, skipping the all-padding tail of short tokens.

        A token is [BOW, bytes, EOW, PAD, PAD, ...]: every window made only of
        PAD has the same value. Cutting a group of tokens to their longest
        content + the widest filter keeps every window that touches content
        and at least one all-PAD window wherever the full width has one, so
        the max over positions, and the output, are exactly those of the full
        width, at a fraction of the cost (most tokens are short). Tokens are
        grouped by length to make the cut count.
        """
        weights = weights if weights is not None else self._inference_weights()
        n_tokens, max_chars = char_ids.shape
        max_width = max(width for width, _ in self.filters)
        content = (char_ids != PAD_ID).sum(dim=1)
        order = torch.argsort(content, stable=True)
        by_length, lengths = char_ids[order], content[order]
        starts = range(0, n_tokens, CNN_CHUNK_TOKENS)
        # Sorted, so a chunk's longest token is its last: every chunk's width in one host
        # copy per call (slicing needs host sizes; one copy per chunk was a sync each on a GPU).
        last = [min(start + CNN_CHUNK_TOKENS, n_tokens) - 1 for start in starts]
        longest_per_chunk = lengths[torch.tensor(last, device=lengths.device)].tolist() if last else []
        chunks = []
        for start, longest in zip(starts, longest_per_chunk):
            columns = min(max_chars, longest + max_width)
            chunks.append(self._convolve(by_length[start : start + CNN_CHUNK_TOKENS, :columns], weights))
        if not chunks:
            return self._convolve(char_ids, weights)
        return torch.cat(chunks).index_select(0, torch.argsort(order))

    def _convolve(self, char_ids: Tensor, weights: Optional[InferenceWeights] = None) -> Tensor:
        weights = weights if weights is not None else self._inference_weights()
        # padding_idx keeps row 0 (batch padding) at zero during training.
        embedded = F.embedding(char_ids, weights.char_embed, padding_idx=0)
        n_tokens, n_chars, char_dim = embedded.shape
        pooled: List[Tensor] = []
        for (width, n), weight, bias in zip(self.filters, weights.conv_weights, self.conv_biases):
            n_pos = n_chars - width + 1
            # Overlapping windows as a view: (tokens, positions, width * char_dim).
            windows = embedded.as_strided(
                (n_tokens, n_pos, width * char_dim),
                (n_chars * char_dim, char_dim, 1),
                embedded.storage_offset(),
            )
            conv = torch.matmul(windows.reshape(n_tokens * n_pos, width * char_dim), weight)
            # max over positions, then bias and activation: the bias is
            # constant over positions and both activations are monotonic.
            conv = conv.view(n_tokens, n_pos, n)
            # In training, max() keeps the argmax: its backward is a scatter,
            # much cheaper than amax()'s (which compares the whole conv output).
            best = conv.max(dim=1).values if weights.trains else conv.amax(dim=1)
            pooled.append(best + bias)  # a bf16 max + the fp32 bias: fp32 from here on
        features = torch.cat(pooled, dim=1)
        return torch.relu(features) if self.activation == "relu" else torch.tanh(features)

    # -- bilm-tf weight layout ------------------------------------------
    def load_tf_arrays(self, arrays: Dict[str, numpy.ndarray]) -> None:
        """Fill from bilm-tf datasets (already shape-checked by the reader)."""
        n_filters = self.n_filters
        with torch.no_grad():
            self.char_embed[0].zero_()
            self.char_embed[1:].copy_(torch.from_numpy(arrays["char_embed"]))
            for i, (weight, bias) in enumerate(zip(self.conv_weights, self.conv_biases)):
                w = arrays[f"CNN/W_cnn_{i}"]  # (1, width, char_dim, n)
                weight.copy_(torch.from_numpy(w.reshape(-1, w.shape[-1])))
                bias.copy_(torch.from_numpy(arrays[f"CNN/b_cnn_{i}"]))
            for k, (weight, bias) in enumerate(zip(self.highway_weights, self.highway_biases)):
                weight[:, :n_filters].copy_(torch.from_numpy(arrays[f"CNN_high_{k}/W_transform"]))
                weight[:, n_filters:].copy_(torch.from_numpy(arrays[f"CNN_high_{k}/W_carry"]))
                bias[:n_filters].copy_(torch.from_numpy(arrays[f"CNN_high_{k}/b_transform"]))
                bias[n_filters:].copy_(torch.from_numpy(arrays[f"CNN_high_{k}/b_carry"]))
            self.proj_weight.copy_(torch.from_numpy(arrays["CNN_proj/W_proj"]))
            self.proj_bias.copy_(torch.from_numpy(arrays["CNN_proj/b_proj"]))
        self.generation.bump()

    def tf_arrays(self) -> Dict[str, numpy.ndarray]:
        n_filters = self.n_filters
        out = {"char_embed": host_array(self.char_embed[1:])}
        for i, ((width, n), weight, bias) in enumerate(zip(self.filters, self.conv_weights, self.conv_biases)):
            out[f"CNN/W_cnn_{i}"] = host_array(weight).reshape(1, width, self.char_dim, n)
            out[f"CNN/b_cnn_{i}"] = host_array(bias)
        for k, (weight, bias) in enumerate(zip(self.highway_weights, self.highway_biases)):
            out[f"CNN_high_{k}/W_transform"] = host_array(weight[:, :n_filters])
            out[f"CNN_high_{k}/W_carry"] = host_array(weight[:, n_filters:])
            out[f"CNN_high_{k}/b_transform"] = host_array(bias[:n_filters])
            out[f"CNN_high_{k}/b_carry"] = host_array(bias[n_filters:])
        out["CNN_proj/W_proj"] = host_array(self.proj_weight)
        out["CNN_proj/b_proj"] = host_array(self.proj_bias)
        return out
