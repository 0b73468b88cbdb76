"""ELMoForManyLangs' token encoder: an ElmoBiLM made of it and our biLSTM is EFML's network.

EFML's network, as its code computes it (``frontend.Model``, ``ConvTokenEmbedder``,
``ElmobiLm``):

- token vector = projection([word embedding; highway(char CNN)]) (either part may be
  absent), no activation after the projection;
- the CNN: Conv1d per filter over the whole padded width, max over positions, then the
  config's activation (relu or tanh); the highway layers always use relu (EFML passes
  ``activation=relu`` whatever the config says), ``gate * x + (1 - gate) * relu(...)``;
- the LSTM: AllenNLP's LstmCellWithProjection (gates i, f, g, o; the bias on the state
  side; no forget bias added), cell and projection clipping, each layer from the second
  on adds its input (the residual);
- layer 0 is the token vector twice, ``[x; x]``, so every layer is 2P wide.

Its LSTM is our ``ProjectedLstm`` with the gate blocks reordered, so the biLSTM, the
stateless/stateful modes and the type cache are ElmoBiLM's (``ElmoBiLM.from_efml``).
"""

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy
import torch
from torch import Tensor, nn

from ..errors import ElmoWeightsError
from .efml_network import EfmlNetwork
from .efml_vocab import EfmlVocab, checked_vocab
from .generation import TracksWeights, WeightsGeneration
from .lstm import FORGET_BIAS, ProjectedLstm, _permute_gate_blocks
from .options import ElmoOptions
from .precision import Precision
from .token_encoder import LstmStacks

# A saved pipeline's EFML biLM: its LSTM biases are EFML's own (no forget offset taken out).
LSTM_BIAS_AS_EFML = "efml"
# EFML's gate blocks (i, f, g, o) -> ProjectedLstm's internal (i, f, o, g).
_EFML_TO_INTERNAL = (0, 1, 3, 2)


class _Embedding(nn.Module):
    """EFML's EmbeddingLayer as its state dict names it (``<name>.embedding.weight``)."""

    def __init__(self, rows: int, dim: int):
        super().__init__()
        self.embedding = nn.Embedding(rows, dim)


class _Highway(nn.Module):
    def __init__(self, dim: int, n_layers: int):
        super().__init__()
        self._layers = nn.ModuleList([nn.Linear(dim, 2 * dim) for _ in range(n_layers)])

    def forward(self, x: Tensor) -> Tensor:
        dim = x.shape[-1]
        for layer in self._layers:
            both = layer(x)
            gate = torch.sigmoid(both[:, dim:])
            x = gate * x + (1 - gate) * torch.relu(both[:, :dim])
        return x


class EfmlTokenEncoder(TracksWeights):
    """EFML's ConvTokenEmbedder (a ``TokenEncoder``), its parameters named as in
    ``token_embedder.pkl``, with the vocabularies that make its id rows.

    Reads the rows ``EfmlVocab`` makes: ``(U, 1 + max_chars)`` ids shifted by +1.
    It always runs fp32 (once per distinct token, through the type cache); the
    precision it is given is the biLSTM's."""

    # EFML's bias already holds its forget gates' offset: kept as is, bit for bit (taking
    # bilm-tf's 1.0 out and adding it back at run time rounded it twice, ~1e-8 to 1e-7 off).
    forget_bias = 0.0

    def __init__(self, network: EfmlNetwork, vocab: EfmlVocab, generation: Optional[WeightsGeneration] = None):
        super().__init__()
        self.generation = generation or WeightsGeneration()  # the biLM's: the type cache is keyed on it
        self.network, self.vocab = network, vocab
        n_chars, n_words = len(vocab.chars or ()), len(vocab.words or ())
        if network.word_dim:
            self.word_emb_layer = _Embedding(n_words, network.word_dim)
        if network.char_dim:
            self.char_emb_layer = _Embedding(n_chars, network.char_dim)
            self.convolutions = nn.ModuleList([nn.Conv1d(network.char_dim, n, w) for w, n in network.filters])
            self.highways = _Highway(network.n_filters, network.n_highway)
        self.projection = nn.Linear(network.word_dim + network.n_filters, network.projection_dim)
        self.precision = Precision.FP32

    @classmethod
    def from_spec(cls, spec: Any, source: str) -> "EfmlTokenEncoder":
        """``spec``'s inverse, checked (the weights are loaded by the caller)."""
        if not isinstance(spec, dict):
            raise ElmoWeightsError(f"{source}: its ELMoForManyLangs settings are damaged (not a map)")
        network = EfmlNetwork.from_dict(spec.get("network"), source)
        dims = (network.char_dim, network.word_dim)
        return cls(network, checked_vocab(spec.get("chars"), spec.get("words"), dims, network.max_chars, source))

    def spec(self) -> Dict[str, Any]:
        """What rebuilds it beside its weights: the network config and the vocabularies."""
        return {
            "network": self.network.to_dict(),
            "chars": self.vocab.chars,
            "words": self.vocab.words,
            "lstm_bias": LSTM_BIAS_AS_EFML,
        }

    def restore_legacy_bias(self, stacks: LstmStacks, spec: Any) -> bool:
        """After loading the arrays of ``spec``'s save into the biLSTM's ``stacks``: one made
        before ``lstm_bias`` (spacy-elmo 0.2.0's development tree) holds each LSTM bias less
        bilm-tf's forget offset, which that code added back at run time; add it back once, so
        those pipelines keep their vectors. Whether it did (the biLM's weights then changed)."""
        if isinstance(spec, dict) and spec.get("lstm_bias") == LSTM_BIAS_AS_EFML:
            return False
        with torch.no_grad():
            for layers in stacks:
                for layer in layers:
                    layer.bias[layer.cell_dim : 2 * layer.cell_dim] += FORGET_BIAS
        return True

    def options(self) -> ElmoOptions:
        """The biLSTM's sizes as ElmoOptions (the char CNN fields describe EFML's when it
        has one; a word-only model gets a one-filter placeholder there, never built)."""
        network = self.network
        has_chars = bool(network.char_dim)
        return ElmoOptions(
            char_dim=network.char_dim if has_chars else 1,
            filters=network.filters if has_chars else [(1, 1)],
            n_highway=network.n_highway if has_chars else 0,
            projection_dim=network.projection_dim,
            lstm_dim=network.lstm_dim,
            n_layers=network.n_layers,
            cell_clip=network.cell_clip,
            proj_clip=network.proj_clip,
            use_skip_connections=True,  # EFML adds each layer's input to its output from layer 1 on
            activation=network.activation,
            max_characters_per_token=max(network.max_chars, 3),
            source=network.source,
        )

    @property
    def proj_weight(self) -> Tensor:
        return self.projection.weight

    def set_precision(self, precision: Precision) -> None:
        """Resolved where it was chosen (``ElmoBiLM``'s entry points); EFML's layers run fp32."""
        self.precision = precision

    def weights_key(self) -> tuple:
        return (self.precision, self.generation.value)

    def batch_ids(self, sentences: Sequence[Sequence[str]]) -> Tuple[numpy.ndarray, numpy.ndarray]:
        return self.vocab.batch_ids(sentences)

    def forward(self, rows: Tensor, trains: bool = False) -> Tensor:
        """Plain torch layers: autograd alone says whether they train (``trains`` is unused)."""
        ids = (rows - 1).clamp(min=0)  # batch padding (0) computes row 0's vector: masked later
        parts = []
        if self.network.word_dim:
            parts.append(self.word_emb_layer.embedding(ids[:, 0]))
        if self.network.char_dim:
            chars = self.char_emb_layer.embedding(ids[:, 1:]).transpose(1, 2)
            act = torch.relu if self.network.activation == "relu" else torch.tanh
            pooled = [act(conv(chars).amax(dim=-1)) for conv in self.convolutions]
            parts.append(self.highways(torch.cat(pooled, dim=-1)))
        return self.projection(torch.cat(parts, dim=-1))

    # -- EFML's state dicts ------------------------------------------------
    def load_efml_state(
        self, stacks: LstmStacks, token_embedder: Dict[str, Tensor], encoder: Dict[str, Tensor]
    ) -> None:
        """``token_embedder.pkl`` into this encoder, ``encoder.pkl`` into the biLSTM's ``stacks``
        (copied in place: the caller marks the biLM's weights changed)."""
        self.load_state_dict(token_embedder, strict=True)
        for name, layers in zip(("forward", "backward"), stacks):
            for k, layer in enumerate(layers):
                load_efml_lstm(layer, encoder, f"{name}_layer_{k}")

    def efml_state(self, stacks: LstmStacks) -> Tuple[Dict[str, Tensor], Dict[str, Tensor]]:
        """``(token_embedder, encoder)`` state dicts in EFML's layout."""
        token_embedder = {k: v.detach().clone() for k, v in self.state_dict().items()}
        encoder: Dict[str, Tensor] = {}
        for name, layers in zip(("forward", "backward"), stacks):
            for k, layer in enumerate(layers):
                encoder.update(efml_lstm_state(layer, f"{name}_layer_{k}"))
        return token_embedder, encoder

    def named_arrays(self, stacks: LstmStacks) -> Dict[str, numpy.ndarray]:
        """Both state dicts, ``token_embedder/...`` and ``encoder/...``, as float32 arrays."""
        token_embedder, encoder = self.efml_state(stacks)
        arrays = {f"token_embedder/{k}": v.float().cpu().numpy() for k, v in token_embedder.items()}
        arrays.update({f"encoder/{k}": v.float().cpu().numpy() for k, v in encoder.items()})
        return arrays


def load_efml_lstm(layer: ProjectedLstm, state: Dict[str, Tensor], prefix: str) -> None:
    """One LstmCellWithProjection's weights into a ProjectedLstm: transposed to ``(in, out)``,
    gate blocks reordered, the bias as it is (an EFML biLM's LSTM adds no forget offset)."""

    def gates(tensor: Tensor) -> Tensor:
        return torch.from_numpy(_permute_gate_blocks(tensor.numpy(), _EFML_TO_INTERNAL))

    with torch.no_grad():
        layer.input_weight.copy_(gates(state[f"{prefix}.input_linearity.weight"].t()))
        layer.state_weight.copy_(gates(state[f"{prefix}.state_linearity.weight"].t()))
        layer.bias.copy_(gates(state[f"{prefix}.state_linearity.bias"]))
        layer.proj_weight.copy_(state[f"{prefix}.state_projection.weight"].t())


def efml_lstm_state(layer: ProjectedLstm, prefix: str) -> Dict[str, Tensor]:
    """``load_efml_lstm``'s inverse."""
    order = tuple(_EFML_TO_INTERNAL.index(k) for k in range(4))

    def gates(tensor: Tensor) -> Tensor:
        return torch.from_numpy(_permute_gate_blocks(tensor.detach().float().cpu().numpy(), order))

    return {
        f"{prefix}.input_linearity.weight": gates(layer.input_weight).t().contiguous(),
        f"{prefix}.state_linearity.weight": gates(layer.state_weight).t().contiguous(),
        f"{prefix}.state_linearity.bias": gates(layer.bias),
        f"{prefix}.state_projection.weight": layer.proj_weight.detach().float().cpu().t().contiguous(),
    }
