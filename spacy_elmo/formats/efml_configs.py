"""The two network configs ELMoForManyLangs ships inside its package.

Every released model's ``config.json`` names one of these by a path that is
not in the model directory; EFML then falls back to its own ``configs/`` folder.
We carry the same content (``elmoformanylangs==0.0.4.post2``; the test compares
them with its files). Note that the two are identical: despite its name,
``cnn_0_...`` has ``char_dim`` 50, so a model pointing at it has a char CNN.
"""

import copy
from typing import Any, Dict, Optional

_RELEASED: Dict[str, Any] = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}

PACKAGED_CONFIGS = ("cnn_50_100_512_4096_sample.json", "cnn_0_100_512_4096_sample.json")


def packaged_config(name: str) -> Optional[Dict[str, Any]]:
    """A copy of the packaged config called ``name`` (a file name), or None."""
    return copy.deepcopy(_RELEASED) if name in PACKAGED_CONFIGS else None
