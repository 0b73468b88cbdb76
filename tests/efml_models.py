"""Random ELMoForManyLangs models made with EFML's own classes, saved in its format.

Needs ``elmoformanylangs`` (the test extra); the library never imports it.
"""

import json
import logging
import random
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

# EFML logs every batch at INFO.
logging.getLogger("elmoformanylangs").setLevel(logging.WARNING)

SPECIAL_CHARS = ["<bow>", "<eow>", "<oov>", "<pad>", "<bos>", "<eos>"]
SPECIAL_WORDS = ["<oov>", "<pad>", "<bos>", "<eos>"]
# Characters of the dictionary: Latin, Cyrillic, CJK, Arabic, the full-width space
# (a one-field line once strip() has eaten it). Anything else in a sentence is <oov>.
KNOWN_CHARS = list("abcdefghijklmnopqrstuvwxyzT.,") + list("привет") + list("你好世界") + list("سلام") + ["\u3000"]
KNOWN_WORDS = ["the", "cat", "sat", ".", "привет", "你好", "سلام", "a", "b"]
SENTENCES = [
    ["the", "cat", "sat", "."],
    ["привет", "мир", "!"],  # мир: a word not in word.dic, м/и/р chars not in char.dic
    ["你好", "世界", "Ω≈ç√∫", "🙂"],  # characters missing from char.dic
    ["سلام", "عليكم"],
    ["T"],  # one token
    # cut tokens, literal markers, an empty token, the full-width space inside a token
    ["x" * 70, "a" * 48, "b" * 49, "<bos>", "<eos>", "", "a\u3000b"],
    ["the"] * 3 + [random.Random(7).choice(KNOWN_WORDS) for _ in range(57)],  # a long sentence
    [],
]


def network_config(rng: random.Random, **overrides: Any) -> Dict[str, Any]:
    """A small network config with sizes drawn from ``rng``."""
    n_filters = rng.randint(1, 4)
    config = {
        "encoder": {
            "name": "elmo",
            "projection_dim": rng.choice([4, 6, 8]),
            "dim": rng.choice([8, 12, 16]),
            "n_layers": rng.randint(1, 3),
            "cell_clip": rng.choice([0, 0.5, 3]),
            "proj_clip": rng.choice([0, 0.5, 3]),
        },
        "token_embedder": {
            "name": "cnn",
            "activation": rng.choice(["relu", "tanh"]),
            "filters": [[w, rng.randint(2, 6)] for w in sorted(rng.sample(range(1, 8), n_filters))],
            "n_highway": rng.randint(0, 2),
            "word_dim": rng.choice([0, 3, 5]),
            "char_dim": rng.choice([3, 4]),
            "max_characters_per_token": rng.choice([10, 50]),
        },
        "dropout": 0.1,
    }
    for key, value in overrides.items():
        section, name = key.split(".")
        config[section][name] = value
    return config


def write_dictionary(path: Path, tokens: List[str], rng: random.Random) -> Dict[str, int]:
    """``token<TAB>id`` lines, ids a shuffled permutation (so a mix-up shows)."""
    ids = list(range(len(tokens)))
    rng.shuffle(ids)
    lexicon = dict(zip(tokens, ids))
    path.write_text("".join(f"{t}\t{i}\n" for t, i in lexicon.items()), encoding="utf-8")
    return lexicon


def make_efml_dir(
    path: Path, seed: int, config: Optional[Dict[str, Any]] = None, scale: float = 0.6, **overrides: Any
) -> Path:
    """A random EFML model directory built by EFML's Model, saved as its training saves one."""
    from elmoformanylangs.frontend import Model
    from elmoformanylangs.modules.embedding_layer import EmbeddingLayer

    rng = random.Random(seed)
    config = config or network_config(rng, **overrides)
    path.mkdir(parents=True, exist_ok=True)
    (path / "network.json").write_text(json.dumps(config), encoding="utf-8")
    (path / "config.json").write_text(json.dumps({"config_path": "network.json", "seed": seed}), encoding="utf-8")
    embedder = config["token_embedder"]
    torch.manual_seed(seed)
    chars = words = None
    if embedder["char_dim"]:
        lexicon = write_dictionary(path / "char.dic", SPECIAL_CHARS + KNOWN_CHARS, rng)
        chars = EmbeddingLayer(embedder["char_dim"], lexicon, fix_emb=False)
    if embedder["word_dim"]:
        lexicon = write_dictionary(path / "word.dic", SPECIAL_WORDS + KNOWN_WORDS, rng)
        words = EmbeddingLayer(embedder["word_dim"], lexicon, fix_emb=False)
    model = Model(config, words, chars, use_cuda=False)
    with torch.no_grad():
        for param in model.parameters():  # every term non-zero, biases included
            param.copy_(torch.randn_like(param) * scale)
    torch.save(model.token_embedder.state_dict(), path / "token_embedder.pkl")
    torch.save(model.encoder.state_dict(), path / "encoder.pkl")
    return path


def efml_fresh(embedder: Any, sentence: List[str]) -> Any:
    """EFML's ``output_layer=-2`` for one sentence from a zero state."""
    embedder.model.encoder.reset_states()
    with torch.no_grad():
        return embedder.sents2elmo([sentence], output_layer=-2)[0]
