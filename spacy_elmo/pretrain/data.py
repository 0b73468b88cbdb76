"""The pretraining text as id arrays, and the vocabulary it is scored against."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy
from confection import Config

from .batches import make_batch
from .corpus import Corpus
from .outputs import VOCAB_NAME
from .vocab import UNK_ID, Vocabulary
from .warm_start import WarmStart, extended_vocab


@dataclass
class TrainingData:
    corpus: Corpus
    train: List[numpy.ndarray]
    dev: List[numpy.ndarray]
    vocab: Vocabulary
    type_words: numpy.ndarray  # corpus type -> vocabulary id
    dev_is_all: bool = True  # False: the dev text has more than corpus.max_dev_sentences sentences

    def batch(self, sentences: List[numpy.ndarray]):
        return make_batch(sentences, self.corpus.type_chars, self.type_words)

    def unknown_rate(self, sentences: List[numpy.ndarray]) -> float:
        """The share of the sentences' words outside the vocabulary (scored as <UNK>)."""
        words = sum(len(s) for s in sentences)
        unknown = sum(int((self.type_words[s] == UNK_ID).sum()) for s in sentences)
        return unknown / words if words else 0.0


def read_data(
    config: Config, output_dir: Path, resuming: bool, max_chars: int, warm: Optional[WarmStart] = None
) -> TrainingData:
    """Train and dev text, and the vocabulary: the run's own when resuming, else
    ``paths.vocab``, else a warm start's extended by the new text, else built from train."""
    paths, corpus_cfg, vocab_cfg = config["paths"], config["corpus"], config["vocab"]
    corpus = Corpus(max_chars)
    read = dict(
        text_format=corpus_cfg["text_format"],
        lang=corpus_cfg["lang"],
        max_sentence_length=corpus_cfg["max_sentence_length"],
    )
    train = corpus.read(paths["train"], **read)
    dev, dev_is_all = read_dev(corpus, paths["dev"], corpus_cfg["max_dev_sentences"], read)
    if resuming:
        vocab = Vocabulary.from_file(output_dir / VOCAB_NAME)
    elif paths["vocab"]:
        vocab = Vocabulary.from_file(paths["vocab"])
    elif warm is not None and warm.vocab is not None:
        vocab = extended_vocab(
            warm.vocab,
            corpus.types,
            corpus.type_counts(train),
            vocab_cfg["min_count"],
            max(vocab_cfg["max_size"], len(warm.vocab)),
        )
    else:
        counts = corpus.type_counts(train)
        vocab = Vocabulary.build(corpus.types, counts, vocab_cfg["min_count"], vocab_cfg["max_size"])
    return TrainingData(corpus, train, dev, vocab, vocab.ids(corpus.types), dev_is_all)


def read_dev(
    corpus: Corpus, path: Optional[str], max_sentences: int, read: Dict[str, Any]
) -> Tuple[List[numpy.ndarray], bool]:
    """The first ``max_sentences`` dev sentences (0: all), and whether they are all of them:
    one more is read to tell, so each figure can say what it scored."""
    if not path:
        return [], True
    dev = corpus.read(path, max_sentences=max_sentences + 1 if max_sentences else 0, role="dev", **read)
    if max_sentences and len(dev) > max_sentences:
        return dev[:max_sentences], False
    return dev, True
