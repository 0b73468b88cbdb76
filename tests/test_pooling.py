"""Pooling safe for empty docs: zeros_for_empty alone, and spacy-elmo.TextCatReduce.v1 beside spaCy's."""

import numpy
import pytest
import spacy
from spacy.training import Example
from thinc.api import Ragged, fix_random_seed, reduce_first, reduce_last, reduce_max, reduce_mean

from spacy_elmo.layers.pooling import zeros_for_empty

TEXTS = [("great movie", "POS"), ("awful film", "NEG"), ("loved it", "POS")]


def ragged(lengths, width=3, seed=0):
    data = numpy.random.default_rng(seed).normal(size=(sum(lengths), width)).astype("float32")
    return Ragged(data, numpy.asarray(lengths, dtype="int32"))


@pytest.mark.parametrize("make_reduction", [reduce_max, reduce_first, reduce_last, reduce_mean])
def test_empty_docs_pool_to_zeros_and_the_others_as_the_reduction_alone(make_reduction):
    mixed, present = ragged([2, 0, 3, 0]), ragged([2, 3])
    numpy.testing.assert_array_equal(mixed.data, present.data)  # empty docs own no rows
    expected, backprop_expected = make_reduction()(present, is_train=True)
    got, backprop = zeros_for_empty(make_reduction())(mixed, is_train=True)
    assert got.shape == (4, 3) and not got[[1, 3]].any()
    numpy.testing.assert_array_equal(got[[0, 2]], expected)
    dY = numpy.arange(12, dtype="float32").reshape(4, 3)
    dX = backprop(dY)
    assert list(dX.lengths) == [2, 0, 3, 0]
    numpy.testing.assert_array_equal(dX.data, backprop_expected(dY[[0, 2]]).data)


def test_a_batch_of_empty_docs_only_and_an_empty_batch():
    pool = zeros_for_empty(reduce_max())
    Y, backprop = pool(ragged([0, 0]), is_train=True)
    assert Y.shape == (2, 3) and not Y.any()
    assert backprop(numpy.ones((2, 3), dtype="float32")).dataXd.shape == (0, 3)
    assert pool.predict(ragged([])).shape == (0, 3)
    with pytest.raises(ValueError, match="sequence lengths must be > 0"):  # what it is for
        reduce_max().predict(ragged([2, 0]))


def textcat(architecture):
    fix_random_seed(0)
    nlp = spacy.blank("en")
    model = {
        "@architectures": architecture,
        "exclusive_classes": True,
        "use_reduce_first": True,
        "use_reduce_last": False,
        "use_reduce_max": True,
        "use_reduce_mean": True,
        "tok2vec": {
            "@architectures": "spacy.HashEmbedCNN.v2",
            "width": 8,
            "depth": 1,
            "embed_size": 64,
            "window_size": 1,
            "maxout_pieces": 2,
            "subword_features": True,
            "pretrained_vectors": None,
        },
    }
    nlp.add_pipe("textcat", config={"model": model})
    return nlp


def examples(nlp, texts=TEXTS):
    return [
        Example.from_dict(nlp.make_doc(text), {"cats": {"POS": float(label == "POS"), "NEG": float(label == "NEG")}})
        for text, label in texts
    ]


def train(nlp, steps=2):
    optimizer = nlp.initialize(lambda: examples(nlp))
    for _ in range(steps):
        nlp.update(examples(nlp), sgd=optimizer)
    return optimizer


def test_the_same_model_as_spacys_on_docs_with_tokens(tmp_path):
    ours = textcat("spacy-elmo.TextCatReduce.v1")
    train(ours)
    spacys = textcat("spacy.TextCatReduce.v1")  # built after: training draws from the seeded generator
    train(spacys)
    texts = [text for text, _ in TEXTS] + ["a film I loved"]
    got, want = [d.cats for d in ours.pipe(texts)], [d.cats for d in spacys.pipe(texts)]
    assert got == want and len({round(c["POS"], 6) for c in got}) > 1  # trained, and the same numbers
    ours.to_disk(tmp_path / "pipeline")
    assert [d.cats for d in spacy.load(tmp_path / "pipeline").pipe(texts)] == got


def test_a_batch_may_mix_empty_texts_with_others():
    nlp = textcat("spacy-elmo.TextCatReduce.v1")
    optimizer = train(nlp)
    empty, full = nlp.pipe(["", "loved it"])
    assert set(empty.cats) == set(full.cats) == {"POS", "NEG"} and empty.cats != full.cats
    losses = nlp.update(examples(nlp, [("", "NEG"), *TEXTS]), sgd=optimizer)
    assert numpy.isfinite(losses["textcat"]) and losses["textcat"] > 0
    spacys = textcat("spacy.TextCatReduce.v1")
    train(spacys)
    with pytest.raises(ValueError, match="sequence lengths must be > 0"):  # spaCy's own, for contrast
        list(spacys.pipe(["", "loved it"]))
