"""Character ids, byte for byte as bilm-tf makes them (bilm/data.py, UnicodeCharsVocabulary)."""

import numpy

from spacy_elmo.bilm import batch_char_ids, sentence_char_ids, token_char_ids


def test_ascii_token():
    ids = token_char_ids("Hi")
    assert len(ids) == 50
    assert ids[:4] == (259, ord("H") + 1, ord("i") + 1, 260)
    assert set(ids[4:]) == {261}


def test_boundary_tokens_and_literals():
    bos = (259, 257, 260) + (261,) * 47
    eos = (259, 258, 260) + (261,) * 47
    assert token_char_ids("<S>") == bos
    assert token_char_ids("</S>") == eos
    ids = sentence_char_ids(["a"])
    assert tuple(ids[0]) == bos and tuple(ids[-1]) == eos
    assert ids.shape == (3, 50)


def test_non_ascii_is_utf8_bytes():
    ids = token_char_ids("é•")
    expected = [b + 1 for b in "é•".encode("utf-8")]  # 2 + 3 bytes
    assert list(ids[1:6]) == expected
    assert ids[6] == 260


def test_long_token_keeps_48_bytes_even_mid_character():
    token = "a" * 47 + "é"  # 49 bytes: the cut splits "é"
    ids = token_char_ids(token)
    assert ids[0] == 259 and ids[49] == 260
    assert list(ids[1:48]) == [ord("a") + 1] * 47
    assert ids[48] == "é".encode("utf-8")[0] + 1  # first byte of the split character
    assert token_char_ids("x" * 200)[1:49] == (ord("x") + 1,) * 48


def test_unencodable_characters_are_dropped():
    assert token_char_ids("a\udcffb")[:4] == (259, ord("a") + 1, ord("b") + 1, 260)


def test_batch_padding_is_zero_and_lengths_count_boundaries():
    ids, lengths = batch_char_ids([["a", "b", "c"], ["d"], []])
    assert ids.shape == (3, 5, 50)
    assert lengths.tolist() == [5, 3, 2]
    assert (ids[1, 3:] == 0).all() and (ids[2, 2:] == 0).all()
    # ElmoBiLM.forward's default lengths: a position is real if any of its ids is > 0.
    assert (ids > 0).any(axis=-1).sum(axis=-1).tolist() == [5, 3, 2]
    assert ids.dtype == numpy.int64
