"""A slow, literal NumPy reading of bilm-tf's model (bilm/elmo_bilm.py), independent of spacy_elmo's modules.

It works on bilm-tf-layout arrays (what ``ElmoBiLM.tf_arrays()`` exports, and
what the files hold), one sentence at a time, with explicit loops: the model
under test must agree with it for any configuration.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy


def naive_char_ids(token: str, max_chars: int = 50) -> List[int]:
    if token == "<S>":
        raw = [258, 256, 259]
    elif token == "</S>":
        raw = [258, 257, 259]
    else:
        raw = [258] + list(token.encode("utf-8", "ignore")[: max_chars - 2]) + [259]
    raw += [260] * (max_chars - len(raw))
    return [i + 1 for i in raw]


def _sigmoid(x):
    return 0.5 * (1.0 + numpy.tanh(0.5 * x))  # overflow-free logistic


def naive_token_vector(arrays: Dict[str, numpy.ndarray], options: dict, ids: Sequence[int]) -> numpy.ndarray:
    char_embed = numpy.vstack([numpy.zeros((1, arrays["char_embed"].shape[1])), arrays["char_embed"]])
    emb = char_embed[list(ids)]  # (50, d)
    act = numpy.tanh if options["char_cnn"]["activation"] == "tanh" else (lambda v: numpy.maximum(v, 0))
    pooled = []
    for i, (width, n) in enumerate(options["char_cnn"]["filters"]):
        W, b = arrays[f"CNN/W_cnn_{i}"][0], arrays[f"CNN/b_cnn_{i}"]  # (width, d, n)
        conv = numpy.stack([numpy.einsum("wd,wdn->n", emb[p : p + width], W) + b for p in range(len(ids) - width + 1)])
        pooled.append(act(conv.max(axis=0)))
    x = numpy.concatenate(pooled)
    for k in range(options["char_cnn"]["n_highway"]):
        carry = _sigmoid(x @ arrays[f"CNN_high_{k}/W_carry"] + arrays[f"CNN_high_{k}/b_carry"])
        transform = numpy.maximum(x @ arrays[f"CNN_high_{k}/W_transform"] + arrays[f"CNN_high_{k}/b_transform"], 0)
        x = carry * transform + (1 - carry) * x
    return x @ arrays["CNN_proj/W_proj"] + arrays["CNN_proj/b_proj"]


def _clip(v, limit):
    return numpy.clip(v, -limit, limit) if limit else v


def naive_lstm_direction(arrays, options, inputs: numpy.ndarray, direction: int, states: Optional[List[Tuple]] = None):
    """Run one direction's stack over ``inputs (n, P)`` in reading order."""
    lstm = options["lstm"]
    outputs, finals = [], []
    layer_input = inputs
    for layer in range(lstm["n_layers"]):
        prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
        W, B, WP = arrays[f"{prefix}/W_0"], arrays[f"{prefix}/B"], arrays[f"{prefix}/W_P_0"]
        C = WP.shape[0]
        h, c = states[layer] if states is not None else (numpy.zeros(WP.shape[1]), numpy.zeros(C))
        out = []
        for x in layer_input:
            z = numpy.concatenate([x, h]) @ W + B
            i, j, f, o = z[:C], z[C : 2 * C], z[2 * C : 3 * C], z[3 * C :]
            c = _sigmoid(f + 1.0) * c + _sigmoid(i) * numpy.tanh(j)
            c = _clip(c, lstm["cell_clip"])
            h = _clip((_sigmoid(o) * numpy.tanh(c)) @ WP, lstm["proj_clip"])
            out.append(h)
        out = numpy.stack(out)
        if lstm["use_skip_connections"] and layer > 0:
            out = out + layer_input
        outputs.append(out)
        finals.append((h, c))
        layer_input = out
    return outputs, finals


def naive_sentence_layers(arrays, options, tokens: Sequence[str], states=None):
    """``(L+1, n, 2P)`` for one sentence, and the final (h, c) per direction and layer."""
    max_chars = options["char_cnn"].get("max_characters_per_token", 50)
    full = ["<S>"] + list(tokens) + ["</S>"]
    x = numpy.stack([naive_token_vector(arrays, options, naive_char_ids(t, max_chars)) for t in full])
    fwd, fwd_final = naive_lstm_direction(arrays, options, x, 0, states[0] if states else None)
    bwd, bwd_final = naive_lstm_direction(arrays, options, x[::-1], 1, states[1] if states else None)
    layers = [numpy.concatenate([x, x], axis=1)]
    layers += [numpy.concatenate([f, b[::-1]], axis=1) for f, b in zip(fwd, bwd)]
    return numpy.stack(layers)[:, 1:-1], (fwd_final, bwd_final)
