"""Held-out perplexity of a pretrained biLM directory, with the exact softmax."""

from pathlib import Path
from typing import Dict, Union

from ..bilm import ElmoBiLM
from ..bilm.language_model import BidirectionalLM
from ..bilm.lm_head import build_lm_head
from ..errors import PretrainDataError
from ..formats.bilm_dir import OPTIONS_NAME
from .corpus import Corpus
from .data import TrainingData
from .evaluation import dev_nll, held_out_figures
from .outputs import SOFTMAX_NAME, VOCAB_NAME, import_softmax, read_softmax_arrays, read_softmax_settings
from .vocab import Vocabulary


def load_language_model(bilm_dir: Union[str, Path], device: str = "cpu") -> "tuple[BidirectionalLM, Vocabulary]":
    """The biLM, its vocabulary and its softmax from a ``pretrain`` output directory."""
    bilm_dir = Path(bilm_dir)
    check_lm_head(bilm_dir)
    bilm = ElmoBiLM.from_dir(bilm_dir, device=device)
    vocab = Vocabulary.from_file(bilm_dir / VOCAB_NAME)
    softmax_file = bilm_dir / SOFTMAX_NAME
    settings = read_softmax_settings(softmax_file)
    if settings["kind"] == "vmf":
        settings["target_vectors"] = read_softmax_arrays(softmax_file)["targets"]
    head = build_lm_head(settings.pop("kind"), bilm.options.projection_dim, len(vocab), **settings)
    import_softmax(head, softmax_file)
    return BidirectionalLM(bilm, head.to(bilm.device)).eval(), vocab


def check_lm_head(bilm_dir: Path) -> None:
    """Perplexity needs the LM head that ``pretrain`` writes beside the biLM: refuse a
    biLM without one (bilm-tf files, a biLM shipped without it) before loading anything."""
    missing = [name for name in (VOCAB_NAME, SOFTMAX_NAME) if not (bilm_dir / name).is_file()]
    if missing and (bilm_dir / OPTIONS_NAME).is_file():
        raise PretrainDataError(
            f"the biLM in {bilm_dir} has no LM head (no {' or '.join(missing)}), so it cannot score words: "
            "perplexity needs a `python -m spacy_elmo pretrain` output directory, which keeps its vocabulary "
            "and softmax (pretrain this biLM further with --paths.init_dir to get one)"
        )


def perplexity(
    bilm_dir: Union[str, Path],
    text: Union[str, Path],
    text_format: str = "auto",
    lang: str = "en",
    max_sentence_length: int = 100,
    device: str = "cpu",
) -> Dict[str, float]:
    """Forward, backward and mean (exp of the mean loss) perplexity of ``text``; for a
    continuous-output (vmf) biLM, which has no word probabilities, its mean losses instead."""
    lm, vocab = load_language_model(bilm_dir, device)
    corpus = Corpus(lm.bilm.options.max_characters_per_token)
    sentences = corpus.read(
        text, text_format=text_format, lang=lang, max_sentence_length=max_sentence_length, role="scored"
    )
    data = TrainingData(corpus, [], sentences, vocab, vocab.ids(corpus.types))
    figures = dev_nll(lm, data)
    result = held_out_figures(lm.head.kind, figures)
    result["unknown_rate"] = data.unknown_rate(sentences)
    result["sentences"] = len(sentences)
    return result
