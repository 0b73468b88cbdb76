"""ElmoBiLM: a token encoder (bilm-tf's char CNN, or ELMoForManyLangs') + the biLSTM, in plain PyTorch.

Its file entry points (``from_files``, ``from_dir``, ``from_efml``, ``to_files``) are the
documented API and stay thin: the formats read and write the files
(``spacy_elmo/formats/network_files.py``), reached through the package's wiring
(``spacy_elmo/bilm_files.py``), so the network imports nothing of them."""

from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .. import bilm_files
from ..errors import ElmoError
from .carried_state import CarriedState
from .char_encoder import CharEncoder
from .efml_model import EfmlTokenEncoder
from .generation import mark_weights_changed
from .id_batches import IdsBatch, length_batches
from .lstm import BiLstm, State
from .options import ElmoOptions
from .precision import Precision, check_precision
from .tf_layout import check_model_size, load_lstm_tf_arrays
from .threads import make_forks_safe
from .token_encoder import LstmStacks, TokenEncoder
from .token_lists import token_lists
from .type_cache import DEFAULT_TYPE_CACHE_SIZE, TypeCache
from .windows import WindowAssembly, strided_windows

PathLike = Union[str, Path]


class ElmoBiLM(nn.Module):
    """Token char ids -> L+1 layers of width 2P (paper eq. 1): a token encoder (bilm-tf's
    char CNN by default, or ELMoForManyLangs' word + char encoder: ``from_efml``), then
    the biLSTM.

    Layer 0 is the context-independent token vector duplicated, ``[x; x]``;
    layer j is ``[forward h_j; backward h_j]``.

    Stateless by default: every sentence starts from zero state, so its
    vectors do not depend on the rest of the batch. ``stateful=True`` carries
    each batch row's final state into the same row of the next batch, as
    bilm-tf and AllenNLP do (and as their published test outputs need).
    """

    def __init__(
        self,
        options: ElmoOptions,
        type_cache_size: int = DEFAULT_TYPE_CACHE_SIZE,
        token_encoder: Optional[TokenEncoder] = None,
    ):
        """``token_encoder``: the context-independent half (default: the char CNN of ``options``)."""
        check_model_size(options)  # before allocating
        # Forked worker processes (nlp.pipe(n_process=N)) run torch on one thread: never a hang.
        make_forks_safe()
        super().__init__()
        self.options = options
        encoder = token_encoder if token_encoder is not None else CharEncoder(options)
        # The token encoder's: one generation for all the weights, every inference cache is keyed on it.
        self.generation = encoder.generation
        # (named char_encoder whatever it is: saved pipelines' arrays are named after it)
        self.char_encoder: TokenEncoder = encoder
        # The biLSTM adds the forget offset its token encoder's format expects (bilm-tf's 1.0, EFML's 0).
        self.bilstm = BiLstm(options, self.generation, encoder.forget_bias)
        # Inference reuses the token vectors of types seen before (exact; see type_cache.py).
        self.type_cache = TypeCache(type_cache_size)
        # Stateful mode: each batch row's final state, carried into the same row of the next batch.
        self._carried = CarriedState()

    def batch_ids(self, sentences: Sequence[Sequence[str]]) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """``(ids, lengths)`` of token lists, the markers included: what ``forward`` reads."""
        return self.char_encoder.batch_ids(sentences)

    def id_batches(self, sentences: Sequence[Sequence[str]], groups: Sequence[Sequence[int]]) -> Iterator["IdsBatch"]:
        """The one encoding path, batch by batch (``embed_batch``, the component): ``groups``
        (sentence indices, e.g. ``length_batches``) as ``IdsBatch``es, made as they are asked
        for, so a caller that runs and keeps part of each holds one batch at most."""
        for group in groups:
            ids, lengths = self.batch_ids([sentences[i] for i in group])
            yield IdsBatch(list(group), ids, lengths)

    # -- construction and files: each entry point checks the precision once, first --
    @classmethod
    def from_files(
        cls,
        options_file: PathLike,
        weight_file: PathLike,
        device: Union[str, torch.device] = "cpu",
        precision: str = "fp32",
    ) -> "ElmoBiLM":
        """Load bilm-tf/AllenNLP ``options.json`` + ``weights.hdf5``, in eval mode.
        ``precision``: "fp32" (exact), "int8" or "bf16" (faster inference; see ``set_precision``).
        bf16 where the device has no native bf16 is refused here, before reading anything."""
        resolved = check_precision(precision, device=device)
        return _read(bilm_files.formats().read_bilm_files(options_file, weight_file))._placed(device, resolved)

    @classmethod
    def from_dir(cls, path: PathLike, device: Union[str, torch.device] = "cpu", precision: str = "fp32") -> "ElmoBiLM":
        """Load a directory holding ``options.json`` + ``weights.hdf5`` (e.g. a pretraining output),
        or else an ELMoForManyLangs model directory (``from_efml``)."""
        resolved = check_precision(precision, device=device)  # an impossible precision is named before any file
        return _read(bilm_files.formats().read_bilm_dir(Path(path)))._placed(device, resolved)

    @classmethod
    def from_efml(
        cls, model_dir: PathLike, device: Union[str, torch.device] = "cpu", precision: str = "fp32"
    ) -> "ElmoBiLM":
        """Load an ELMoForManyLangs model directory (config.json, char.dic/word.dic,
        token_embedder.pkl, encoder.pkl): EFML's network exactly, see ``efml_model.py``."""
        resolved = check_precision(precision, device=device)
        return _read(bilm_files.formats().read_efml_bilm(model_dir))._placed(device, resolved)

    @classmethod
    def from_efml_spec(cls, spec: Any, source: str) -> "ElmoBiLM":
        """An ELMoForManyLangs biLM from its token encoder's ``spec`` (checked), weights to load."""
        encoder = EfmlTokenEncoder.from_spec(spec, source)
        return cls(encoder.options(), token_encoder=encoder)

    def _placed(self, device: Union[str, torch.device], precision: Precision) -> "ElmoBiLM":
        """On ``device``, in eval mode, at ``precision`` (checked by the caller)."""
        model = self.to(device).eval()
        model._use_precision(precision)
        return model

    def to_files(self, options_file: PathLike, weight_file: PathLike, dtype: str = "float32") -> None:
        """Write the bilm-tf layout (readable by ``from_files``, bilm-tf and AllenNLP);
        ``dtype="float16"`` stores half-size datasets."""
        bilm_files.formats().write_bilm_files(self, options_file, weight_file, dtype)

    # -- how inference runs -------------------------------------------------
    @property
    def precision(self) -> str:
        return self.char_encoder.precision.value

    def set_precision(self, precision: Union[str, Precision]) -> None:
        """ "fp32": the exact path. "int8": the LSTM's input, recurrent and projection
        matmuls and the highway/projection layers run int8 weights (per output
        channel) with dynamically quantized activations (fbgemm/onednn), on CPU,
        without gradients. "bf16": those and the char CNN run bfloat16 copies of the
        weights (fp32 sums; the LSTM cell state, activations and outputs stay fp32),
        without gradients, where the device has native bf16 (else refused unless
        ``SPACY_ELMO_FORCE_BF16=1``). The fp32 weights stay: saving and switching back are exact.
        A name is checked here, where it is chosen; a ``Precision`` was checked where it was."""
        if not isinstance(precision, Precision):
            precision = check_precision(precision, device=self.device)  # decided here: the modules trust it
        self._use_precision(precision)

    def _use_precision(self, precision: Precision) -> None:
        self.char_encoder.set_precision(precision)
        for stack in self._lstm_stacks():
            for layer in stack:
                layer.set_precision(precision)
        self.type_cache.clear()

    @property
    def weights_generation(self) -> int:
        """Changes whenever the weights change (what inference caches are keyed on)."""
        return self.generation.value

    def mark_weights_changed(self) -> None:
        """Call after changing the weights in place yourself (an optimizer step outside
        thinc or pretraining): the packed kernels and cached vectors are then rebuilt."""
        mark_weights_changed(self)

    def train(self, mode: bool = True) -> "ElmoBiLM":
        # Leaving train mode is where a torch training loop hands the weights back to
        # inference: its optimizer may have changed them in place without saying so.
        if self.training and not mode:
            self.mark_weights_changed()
        return super().train(mode)

    def set_type_cache_size(self, max_types: int) -> None:
        """How many token types' vectors inference keeps (0: none)."""
        self.type_cache = TypeCache(max_types)

    def load_tf_arrays(self, arrays: Dict[str, numpy.ndarray]) -> None:
        """bilm-tf's datasets (already shape-checked by the reader) into the weights."""
        refusal = "an ELMoForManyLangs biLM has no bilm-tf weight layout (load it with ElmoBiLM.from_efml)"
        self._char_cnn(refusal).load_tf_arrays(arrays)
        load_lstm_tf_arrays(self._lstm_stacks(), arrays)
        self.reset_states()

    def load_efml_state(self, token_embedder: Dict[str, Tensor], encoder: Dict[str, Tensor]) -> None:
        """ELMoForManyLangs' two state dicts (checked by the reader) into the weights."""
        if not isinstance(self.char_encoder, EfmlTokenEncoder):
            raise ElmoError("a bilm-tf biLM has no ELMoForManyLangs state dicts (load it with ElmoBiLM.from_files)")
        self.char_encoder.load_efml_state(self._lstm_stacks(), token_embedder, encoder)
        self.mark_weights_changed()  # copied in place: the kernels and cached vectors go
        self.reset_states()
        self.type_cache.clear()

    def tf_arrays(self) -> Dict[str, numpy.ndarray]:
        refusal = "an ELMoForManyLangs biLM cannot be written as bilm-tf options.json + weights.hdf5"
        return self._char_cnn(refusal).named_arrays(self._lstm_stacks())

    def _char_cnn(self, refusal: str) -> CharEncoder:
        """The token encoder, which bilm-tf's layout needs to be its char CNN."""
        if not isinstance(self.char_encoder, CharEncoder):
            raise ElmoError(refusal)
        return self.char_encoder

    def restore_legacy_bias(self, spec: Any) -> None:
        """After a saved pipeline's arrays load (``spec``: its token encoder's, as saved): an
        older save's LSTM bias is mended (``EfmlTokenEncoder.restore_legacy_bias``)."""
        if self.char_encoder.restore_legacy_bias(self._lstm_stacks(), spec):
            self.mark_weights_changed()

    def content(self) -> Tuple[Dict[str, numpy.ndarray], Any]:
        """What the biLM is, wherever its files lie: its weights as its format names them,
        and its options (and its token encoder's spec, if it has one); ``embed`` resumes
        only a run of the same biLM (their sha256, ``io.arrays_sha256``)."""
        spec = self.char_encoder.spec()
        return self.char_encoder.named_arrays(self._lstm_stacks()), self.options.to_dict() if spec is None else spec

    def _lstm_stacks(self) -> LstmStacks:
        # cast: nn.ModuleList is not generic; these hold ProjectedLstm layers only.
        stacks = (self.bilstm.forward_layers, self.bilstm.backward_layers)
        return cast(LstmStacks, stacks)

    @property
    def output_dim(self) -> int:
        return self.options.output_dim

    @property
    def n_output_layers(self) -> int:
        return self.options.n_output_layers

    @property
    def device(self) -> torch.device:
        return self.char_encoder.proj_weight.device

    # -- the model --------------------------------------------------------
    def token_embeddings(self, char_ids: Tensor) -> Tensor:
        """``(..., max_chars)`` ids -> ``(..., P)`` context-independent vectors (the char CNN alone)."""
        type_chars, type_index = unique_types(char_ids)
        return F.embedding(type_index.to(self.device), self.encode_types(type_chars, self.runs_training()))

    def runs_training(self) -> bool:
        """The one training-or-inference switch of a forward, passed down to every module: a run
        trains where autograd records it and a weight would get a gradient (in fp32, whatever
        the precision: int8 and bf16 copies have no gradients); else it infers (packed or
        int8/bf16 kernels, the type cache)."""
        return torch.is_grad_enabled() and any(param.requires_grad for param in self.parameters())

    def encode_types(self, type_chars: Tensor, trains: bool) -> Tensor:
        """The char encoder over distinct tokens (on any device): through the type cache at
        inference outside train mode (in train mode an optimizer may change the weights unseen)."""
        if trains or self.training:
            return self.char_encoder(type_chars.to(self.device), trains)
        return self.type_cache.encode(type_chars, self.char_encoder, self.char_encoder.weights_key(), self.device)

    def contextual(
        self,
        type_chars: Tensor,
        type_index: Tensor,
        lengths: Tensor,
        initial: Optional[List[List[State]]] = None,
        return_states: bool = False,
        dropout: float = 0.0,
    ) -> Tuple[Tensor, List[Tensor], Optional[List[List[State]]]]:
        """The biLM's one composition, for inference and pretraining alike.

        The char CNN runs once per distinct token (``type_chars (U, max_chars)``;
        ``type_index (B, T)`` says which one stands at each position: text
        repeats a lot), then the biLSTM. Returns the token vectors ``(T, B, P)``,
        the L LSTM layers ``(T, B, 2P)`` and, with ``return_states``, the final
        states. ``dropout`` (pretraining) applies to the token vectors and
        between the LSTM layers.
        """
        trains = self.runs_training()
        tokens = F.embedding(type_index.t(), self.encode_types(type_chars, trains))
        if dropout:
            tokens = F.dropout(tokens, dropout)
        layers, finals = self.bilstm(tokens, lengths, initial, return_states, dropout, trains)
        return tokens, layers, finals

    def forward(self, char_ids: Tensor, lengths: Optional[Tensor] = None, stateful: bool = False) -> Tensor:
        """``char_ids (B, T, max_chars)``, boundaries included -> ``(L+1, B, T, 2P)``.

        ``lengths`` counts each row's real positions (boundaries included);
        by default every position with a non-zero id. Outputs at padded
        positions are zero.
        """
        if lengths is None:
            lengths = (char_ids > 0).any(dim=-1).sum(dim=-1)
        lengths = lengths.to(self.device)
        # The distinct tokens where the ids are (the host, for text): the type cache keys
        # them there, so a GPU biLM copies no ids back to the host.
        type_chars, type_index = unique_types(char_ids)
        initial = self._carried.initial(char_ids.shape[0], self._zero_states) if stateful else None
        tokens, lstm_layers, finals = self.contextual(
            type_chars, type_index.to(self.device), lengths, initial, return_states=stateful
        )
        if finals is not None:  # stateful: the final states were asked for
            self._carried.update(finals)
        layers = torch.stack([torch.cat([tokens, tokens], dim=-1)] + lstm_layers).transpose(1, 2)
        mask = torch.arange(layers.shape[2], device=self.device).unsqueeze(0) < lengths.unsqueeze(1)
        return layers * mask.unsqueeze(-1).to(layers.dtype)

    # -- state between batches (stateful mode) ----------------------------
    def reset_states(self) -> None:
        """Forget the carried state: the next stateful batch starts from zero."""
        self._carried.reset()

    def export_states(self) -> Dict[str, numpy.ndarray]:
        """The carried state as plain arrays (empty when there is none), for checkpoints."""
        return self._carried.export()

    def import_states(self, arrays: Dict[str, numpy.ndarray]) -> None:
        """Restore a state saved by ``export_states`` (checked: every array, its width, its rows)."""
        widths = {"h": self.options.projection_dim, "c": self.options.lstm_dim}
        self._carried.restore(arrays, self.options.n_layers, widths, self.char_encoder.proj_weight)

    def _zero_states(self, batch_size: int) -> List[List[State]]:
        like = self.char_encoder.proj_weight
        return [[layer.zero_state(batch_size, like) for layer in stack] for stack in self._lstm_stacks()]

    # -- the public convenience API -----------------------------------------
    def embed_batch(
        self, sentences: Sequence[Sequence[str]], stateful: bool = False, max_length: Optional[int] = None
    ) -> List[numpy.ndarray]:
        """Layer vectors of tokenised sentences: one float32 ``(L+1, n_i, 2P)`` array each.

        Stateless (default): sentences are sorted by length and batched for
        speed; every result is independent of the others. ``max_length``: a
        longer sentence runs in overlapping windows of that many tokens (as the
        spaCy component runs long docs; see ``windows.py``). ``stateful=True``:
        the list is run as ONE batch whose rows carry state from the previous
        stateful call (the reference implementations' behaviour), unwindowed.
        """
        sentences = token_lists(sentences)
        if max_length is not None and not stateful:
            return self._embed_windowed(sentences, max_length)
        return self._embed(sentences, stateful)

    def _embed(self, sentences: Sequence[Sequence[str]], stateful: bool) -> List[numpy.ndarray]:
        if stateful:
            groups = [list(range(len(sentences)))] if sentences else []
        else:
            groups = length_batches([len(s) for s in sentences])
        results: List[Any] = [None] * len(sentences)
        with torch.no_grad():
            for batch in self.id_batches(sentences, groups):
                layers = self.forward(torch.from_numpy(batch.ids), torch.from_numpy(batch.lengths), stateful=stateful)
                for index, sentence in batch.sentences(layers.float().cpu().numpy()):
                    results[index] = sentence
        return results

    def _embed_windowed(self, sentences: Sequence[Sequence[str]], max_length: int) -> List[numpy.ndarray]:
        windows = [
            (i, w) for i, sentence in enumerate(sentences) for w in strided_windows(0, len(sentence), max_length)
        ]
        assembly = WindowAssembly([len(sentence) for sentence in sentences])
        for (i, window), output in zip(
            windows, self._embed([sentences[i][w.start : w.end] for i, w in windows], False)
        ):
            assembly.place(i, window, window.owned(output))
        empty = (self.n_output_layers, 0, self.output_dim)
        return [numpy.zeros(empty, dtype=numpy.float32) if result is None else result for result in assembly.results]


def _read(bilm: Any) -> ElmoBiLM:
    """What the formats' entry points return: a biLM (typed through the wiring as ``Any``)."""
    return cast(ElmoBiLM, bilm)


def unique_types(char_ids: Tensor) -> Tuple[Tensor, Tensor]:
    """The distinct tokens of ``char_ids (..., max_chars)`` (``(U, max_chars)``) and which
    one stands at each position (``(...)``): text repeats a lot, the char CNN runs once per type."""
    type_chars, inverse = torch.unique(char_ids.reshape(-1, char_ids.shape[-1]), dim=0, return_inverse=True)
    return type_chars, inverse.view(char_ids.shape[:-1])
