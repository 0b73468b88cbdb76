"""What ``ElmoBiLM`` asks of its token encoder, the context-independent half of the biLM:
bilm-tf's char CNN (``char_encoder.py``) or ELMoForManyLangs' word + char encoder
(``efml_model.py``). The biLSTM, the type cache and the stateless/stateful modes are the
biLM's whichever it is."""

from typing import Any, Dict, Optional, Protocol, Sequence, Tuple

import numpy
from torch import Tensor

from .generation import WeightsGeneration
from .lstm import ProjectedLstm
from .precision import Precision

# The biLSTM's layers, per direction (forward, backward).
LstmStacks = Tuple[Sequence[ProjectedLstm], Sequence[ProjectedLstm]]


class TokenEncoder(Protocol):
    """An ``nn.Module`` (a ``TracksWeights``) from one row of ids per distinct token to its vector."""

    generation: WeightsGeneration  # the biLM's: every inference cache is keyed on it
    precision: Precision
    forget_bias: float  # what the biLSTM adds to its forget gates (its format's convention)

    @property
    def proj_weight(self) -> Tensor:
        """Its output projection: where (device) and how (dtype) the biLM runs."""

    def __call__(self, rows: Tensor, trains: bool = False) -> Tensor:
        """``(U, width)`` id rows of distinct tokens -> ``(U, P)`` vectors (its ``forward``);
        ``trains``: the biLM's one training-or-inference decision for this forward."""

    def weights_key(self) -> tuple:
        """Changes whenever its weights, or how they run, change (the type cache's key)."""

    def set_precision(self, precision: Precision) -> None:
        """A precision already checked where it was chosen (``ElmoBiLM``'s entry points)."""

    def batch_ids(self, sentences: Sequence[Sequence[str]]) -> Tuple[numpy.ndarray, numpy.ndarray]:
        """``(ids (B, T, width), lengths)`` of token lists, the sentence markers included."""

    def spec(self) -> Optional[Dict[str, Any]]:
        """What rebuilds it beside the biLM's options and weights (None: the options do)."""

    def named_arrays(self, stacks: LstmStacks) -> Dict[str, numpy.ndarray]:
        """The biLM's weights (this encoder's and the biLSTM's ``stacks``) as its file format
        names them: what the biLM's content hash covers."""

    def restore_legacy_bias(self, stacks: LstmStacks, spec: Any) -> bool:
        """After a saved biLM's arrays load into ``stacks``: mend a bias an older save of this
        format held otherwise (``spec``: its spec as saved); whether it changed any."""
