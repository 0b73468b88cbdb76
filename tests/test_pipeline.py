"""The `elmo` component through `nlp`: annotations, storage, segments, serialization."""

import importlib.metadata
import pickle
import re

import numpy
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc

from spacy_elmo.bilm import ElmoBiLM, ElmoError
from spacy_elmo.doc_data import held_for_listeners
from spacy_elmo.errors import ElmoNoWeightsError
from spacy_elmo.layers.bilm_layer import DEFAULT_MAX_SEGMENT_LENGTH, get_bilm

from .conftest import make_nlp, tiny_bilm

TEXTS = [
    "Alice met Bob in Paris.",
    "ELMo vectors depend on the whole sentence, not only on the word.",
    "Short.",
    "Naïve café — “quotes” 🙂 and more.",
]


@pytest.fixture
def weight_files(tmp_path):
    model = tiny_bilm(seed=31)
    options, weights = tmp_path / "options.json", tmp_path / "weights.hdf5"
    model.to_files(options, weights)
    return options, weights


@pytest.fixture
def reference(weight_files):
    return ElmoBiLM.from_files(*weight_files)


def test_layers_equal_the_bilm(weight_files, reference):
    nlp = make_nlp(weight_files)
    for doc in nlp.pipe(TEXTS):
        expected = reference.embed_batch([[t.text for t in doc]])[0]
        assert doc._.elmo_layers.dtype == numpy.float32
        assert doc._.elmo_layers.shape == (3, len(doc), 16)
        numpy.testing.assert_allclose(doc._.elmo_layers, expected, atol=1e-4)


def test_sentences_run_separately(weight_files, reference):
    nlp = make_nlp(weight_files)
    nlp.add_pipe("sentencizer", first=True)
    doc = nlp("First sentence here. And a second one!")
    assert len(list(doc.sents)) == 2
    for sent in doc.sents:
        expected = reference.embed_batch([[t.text for t in sent]])[0]
        numpy.testing.assert_allclose(doc._.elmo_layers[:, sent.start : sent.end], expected, atol=1e-4)


def test_vectors_do_not_depend_on_batch(weight_files):
    nlp = make_nlp(weight_files, cache_size_mb=0)
    one_by_one = [doc._.elmo_layers for doc in nlp.pipe(TEXTS, batch_size=1)]
    together = [doc._.elmo_layers for doc in nlp.pipe(TEXTS, batch_size=64)]
    reordered = [doc._.elmo_layers for doc in nlp.pipe(TEXTS[::-1] + ["Other text entirely."], batch_size=3)]
    for a, b, c in zip(one_by_one, together, reordered[:4][::-1]):
        numpy.testing.assert_allclose(a, b, atol=1e-5)
        numpy.testing.assert_allclose(a, c, atol=1e-5)


def test_token_and_span_vectors(weight_files):
    nlp = make_nlp(weight_files)
    doc = nlp(TEXTS[1])
    layers = doc._.elmo_layers
    numpy.testing.assert_allclose(doc[3]._.elmo, layers[:, 3].mean(axis=0), atol=1e-6)
    numpy.testing.assert_allclose(doc[2:5]._.elmo, layers[:, 2:5].mean(axis=0).mean(axis=0), atol=1e-6)
    assert doc[2:2]._.elmo is None

    weighted = make_nlp(weight_files, token_mix=[0.0, 1.0, 3.0])(TEXTS[1])
    numpy.testing.assert_allclose(weighted[3]._.elmo, 0.25 * layers[1, 3] + 0.75 * layers[2, 3], atol=1e-6)


@pytest.mark.parametrize(
    "store,dtype", [("mix", "float32"), ("mix", "float16"), ("all", "float16"), ("none", "float32")]
)
def test_storage_options(weight_files, store, dtype):
    full = make_nlp(weight_files)(TEXTS[0])
    doc = make_nlp(weight_files, store=store, store_dtype=dtype)(TEXTS[0])
    tolerance = 1e-6 if dtype == "float32" else 2e-3
    if store == "all":
        assert doc.user_data[("spacy_elmo", "layers")].dtype == numpy.float16
        assert doc._.elmo_layers.dtype == numpy.float32
        numpy.testing.assert_allclose(doc._.elmo_layers, full._.elmo_layers, atol=tolerance)
    else:
        assert doc._.elmo_layers is None
    if store == "none":
        assert doc[0]._.elmo is None and doc[0:2]._.elmo is None
    else:
        numpy.testing.assert_allclose(doc[1]._.elmo, full[1]._.elmo, atol=tolerance)
    assert not held_for_listeners(doc) and ("spacy_elmo", "pending") not in doc.user_data  # no listeners


def test_empty_docs(weight_files):
    nlp = make_nlp(weight_files)
    docs = list(nlp.pipe(["", "Not empty.", ""]))
    assert docs[0]._.elmo_layers.shape == (3, 0, 16)
    assert docs[1]._.elmo_layers.shape == (3, 3, 16)
    assert nlp("")._.elmo_layers.shape == (3, 0, 16)


def test_empty_batches_and_an_empty_doc_stored_as_none(weight_files):
    nlp = make_nlp(weight_files)
    elmo = nlp.get_pipe("elmo")
    assert list(nlp.pipe([])) == []
    assert elmo.predict([]) == []
    assert elmo.update([]) == {"elmo": 0.0}
    lean = make_nlp(weight_files, store="none")
    empty = lean("")
    assert len(empty) == 0 and empty._.elmo_layers is None and empty[0:0]._.elmo is None
    assert [doc._.elmo_layers for doc in lean.pipe(["", "Not empty."])] == [None, None]


def test_long_doc_runs_in_overlapping_windows(weight_files, reference):
    from spacy_elmo.bilm.windows import strided_windows

    nlp = make_nlp(weight_files)
    nlp.get_pipe("elmo").configure(max_segment_length=40)
    words = [f"w{i % 17}" for i in range(1000)]
    doc = nlp(Doc(nlp.vocab, words=words))
    assert doc._.elmo_layers.shape == (3, 1000, 16)
    windows = strided_windows(0, 1000, 40)
    assert [w.end - w.start for w in windows] == [40] * len(windows) and windows[0].start == 0
    assert sum(w.own_end - w.own_start for w in windows) == 1000  # every token kept once
    for w in windows:
        # Each token has its window's vectors, and sits at least a quarter window from its inner edges.
        expected = reference.embed_batch([words[w.start : w.end]])[0][:, w.own_start - w.start : w.own_end - w.start]
        numpy.testing.assert_allclose(doc._.elmo_layers[:, w.own_start : w.own_end], expected, atol=1e-4)
        if w.start > 0:
            assert w.own_start - w.start >= 10
        if w.end < 1000:
            assert w.end - w.own_end >= 10


def test_embed_batch_puts_windows_back_with_the_components_assembly(weight_files, reference, monkeypatch):
    """One window assembly (issue 75): ``embed_batch(max_length=...)`` and the component place
    their windows through the same ``WindowAssembly``, with the same vectors."""
    from spacy_elmo.bilm.windows import WindowAssembly

    placed = []
    real_place = WindowAssembly.place
    monkeypatch.setattr(WindowAssembly, "place", lambda self, *args: placed.append(args) or real_place(self, *args))
    nlp = make_nlp(weight_files, cache_size_mb=0)
    nlp.get_pipe("elmo").configure(max_segment_length=40)
    words = [f"w{i % 17}" for i in range(200)]
    doc = nlp(Doc(nlp.vocab, words=words))
    by_component = len(placed)
    embedded = reference.embed_batch([words, [], ["a"]], max_length=40)
    assert by_component == len(placed) - by_component - 1 == 9  # 9 windows each, and the one-token sentence
    numpy.testing.assert_allclose(embedded[0], doc._.elmo_layers, atol=1e-5, rtol=0)  # batched with other rows
    assert embedded[1].shape == (3, 0, 16) and embedded[1].dtype == numpy.float32
    numpy.testing.assert_array_equal(embedded[2], reference.embed_batch([["a"]])[0])


def test_a_window_of_no_tokens_is_refused_naming_max_length():
    model = tiny_bilm(seed=5)
    with pytest.raises(ElmoError, match="max_length .* must be >= 1, got 0"):
        model.embed_batch([["a", "b"]], max_length=0)


def test_layer_cache_keeps_its_byte_bound_least_recently_used_first():
    from spacy_elmo.layers.bilm_output_cache import LayerCache

    cache = LayerCache(max_mb=100 / 2**20)  # 100 bytes: two 40-byte entries fit, not three
    cache.check_weights("w")
    for key in "abc":
        cache.put(key, numpy.zeros(10, dtype="float32"))
        if key == "b":
            assert cache.get("a") is not None  # "a" is now the most recently used
    assert len(cache) == 2 and cache.nbytes == 80 and cache.get("b") is None and cache.get("a") is not None
    cache.put("big", numpy.zeros(26, dtype="float32"))  # 104 bytes: never kept
    assert cache.get("big") is None and cache.nbytes == 80
    with pytest.raises(ValueError, match="read-only"):
        cache.get("a")[0] = 1.0  # shared by every lookup: read-only
    cache.check_weights("other weights")
    assert len(cache) == 0 and cache.nbytes == 0


def test_cache_is_exact_and_follows_weight_changes(weight_files):
    nlp = make_nlp(weight_files)
    elmo = nlp.get_pipe("elmo")
    first = [d._.elmo_layers.copy() for d in nlp.pipe(TEXTS)]
    cache = elmo.model.attrs["cache"]
    assert len(cache) == len(TEXTS) and cache.hits == 0
    second = [d._.elmo_layers for d in nlp.pipe(TEXTS)]
    assert cache.hits == len(TEXTS)
    for a, b in zip(first, second):
        numpy.testing.assert_array_equal(a, b)
    bilm = get_bilm(elmo.model)
    with __import__("torch").no_grad():
        bilm.char_encoder.proj_bias.add_(1.0)
    bilm.mark_weights_changed()  # what code that edits the weights in place says (bilm/generation.py)
    changed = nlp(TEXTS[0])._.elmo_layers
    assert numpy.abs(changed - first[0]).max() > 0.1  # not served from the stale cache


def test_no_weights_is_a_helpful_error(tmp_path, monkeypatch):
    import spacy_elmo.loaders as loaders

    monkeypatch.setattr(loaders, "DEFAULT_BILM_DIR", tmp_path / "missing")  # an install without the default
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    with pytest.raises(ElmoNoWeightsError, match="has no biLM weights") as info:
        nlp("text")
    assert "options_file" in str(info.value) and "pretrain" in str(info.value)


def test_bad_settings_are_refused(weight_files):
    options, weights = weight_files
    nlp = spacy.blank("en")
    with pytest.raises(ElmoError, match="store must be one of"):
        nlp.add_pipe("elmo", config={"store": "some"})
    with pytest.raises(ElmoError, match="options_file and weight_file go together"):
        nlp.add_pipe("elmo", name="e2", config={"options_file": str(options)})
    for bad in ([-1, 2], [], [0, 0, 0]):
        with pytest.raises(ElmoError, match="token_mix must be non-negative layer weights with a positive sum"):
            nlp.add_pipe("elmo", name="e3", config={"token_mix": bad})
    with pytest.raises(ElmoError, match="store_dtype must be one of"):
        nlp.add_pipe("elmo", name="e4", config={"store_dtype": "int8"})
    with pytest.raises(ElmoError, match="cache_size_mb must be >= 0, got -1"):
        nlp.add_pipe("elmo", name="e5", config={"cache_size_mb": -1})
    with pytest.raises(ElmoError, match="give either bilm_dir or options_file \\+ weight_file, not both"):
        nlp.add_pipe(
            "elmo",
            name="e6",
            config={"options_file": str(options), "weight_file": str(weights), "bilm_dir": str(options.parent)},
        )
    assert nlp.pipe_names == []  # nothing half-added


def fails_before_any_doc(nlp: Language, match: str) -> None:
    """The named-file error, at the first doc and at initialize, with nothing annotated."""
    with pytest.raises(FileNotFoundError, match=match):
        nlp("text")
    with pytest.raises(FileNotFoundError, match=match):
        nlp.initialize()
    assert not nlp.get_pipe("elmo").has_weights


def test_a_missing_or_wrong_weight_file_fails_at_initialize_or_the_first_doc(tmp_path, weight_files):
    """Building the pipe reads no file (spacy.load must not, and cannot be told from a
    user's add_pipe without reading spaCy's stack); the one resolution checks them first."""
    options, weights = weight_files
    bad = {
        "elmo weight_file not found: .*gone.hdf5": {
            "options_file": str(options),
            "weight_file": str(tmp_path / "gone.hdf5"),
        },
        r"elmo weight_file .* is a directory, not a file \(a biLM directory goes to bilm_dir": {
            "options_file": str(options),
            "weight_file": str(tmp_path),
        },
        "elmo bilm_dir not found": {"bilm_dir": str(tmp_path / "nowhere")},
        "elmo bilm_dir is empty: name a path, or leave it null": {"bilm_dir": ""},  # not the bundled biLM
        "elmo options_file is empty": {"options_file": " ", "weight_file": str(weights)},
    }
    for match, config in bad.items():
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config=config)  # accepted: the files are checked once, when first needed
        fails_before_any_doc(nlp, match)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "weights.hdf5").write_bytes(b"")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": str(tmp_path / "half")})
    with pytest.raises(FileNotFoundError) as info:
        nlp("text")
    assert str(info.value) == (
        f"elmo bilm_dir {tmp_path / 'half'} has no options.json: a biLM directory holds "
        "options.json and weights.hdf5 (as `python -m spacy_elmo pretrain` writes them); an "
        "ELMoForManyLangs model directory holds config.json, char.dic and/or word.dic, token_embedder.pkl and "
        "encoder.pkl"
    )
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", name="elmo_de", config={"bilm_dir": str(tmp_path / "nowhere")})
    with pytest.raises(FileNotFoundError, match="^elmo_de bilm_dir not found"):  # which of several components
        nlp("text")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"options_file": str(options), "weight_file": str(weights)})
    assert nlp.pipe_names == ["elmo"]  # and the weights are still read at first use only
    assert not nlp.get_pipe("elmo").has_weights
    assert nlp("text")._.elmo_layers.shape[0] == 3


def test_config_sizes_must_match_the_weights(weight_files):
    options, weights = weight_files
    nlp = spacy.blank("en")
    model = {
        "@architectures": "spacy-elmo.ElmoBiLM.v1",
        "char_dim": 4,
        "filters": [[1, 4], [2, 6], [3, 8]],
        "n_highway": 2,
        "projection_dim": 8,
        "lstm_dim": 32,
        "n_layers": 2,
    }
    nlp.add_pipe("elmo", config={"options_file": str(options), "weight_file": str(weights), "model": model})
    with pytest.raises(ElmoError, match=r"lstm.dim is 32 in the component.s model config but 16 in .*options.json"):
        nlp("text")
    with pytest.raises(ElmoError, match="set all of .* or none of them"):
        spacy.blank("en").add_pipe(
            "elmo", config={"model": {"@architectures": "spacy-elmo.ElmoBiLM.v1", "lstm_dim": 8}}
        )


def test_pretraining_directory_is_accepted(tmp_path, weight_files, reference):
    bilm_dir = tmp_path / "pretrained"
    reference.to_files(bilm_dir / "options.json", bilm_dir / "weights.hdf5")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": str(bilm_dir)})
    doc = nlp(TEXTS[0])
    numpy.testing.assert_allclose(doc._.elmo_layers, reference.embed_batch([[t.text for t in doc]])[0], atol=1e-4)


def test_initialize_with_a_loader(weight_files, reference):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    options, weights = weight_files
    nlp.config["initialize"]["components"]["elmo"] = {
        "weights": {
            "@misc": "spacy-elmo.WeightsFromFiles.v1",
            "options_file": str(options),
            "weight_file": str(weights),
        }
    }
    nlp.initialize()
    doc = nlp(TEXTS[2])
    numpy.testing.assert_allclose(doc._.elmo_layers, reference.embed_batch([[t.text for t in doc]])[0], atol=1e-4)


def test_saved_pipeline_needs_no_original_files(tmp_path, weight_files):
    options, weights = weight_files
    nlp = make_nlp(weight_files)
    before = [d._.elmo_layers for d in nlp.pipe(TEXTS)]
    nlp.to_disk(tmp_path / "pipeline")
    options.unlink()
    weights.unlink()
    loaded = spacy.load(tmp_path / "pipeline")
    # Equal to float32 precision: MKL's sums may differ in the last bit with memory alignment.
    for doc, expected in zip(loaded.pipe(TEXTS), before):
        numpy.testing.assert_allclose(doc._.elmo_layers, expected, atol=1e-6, rtol=0)
    from_bytes = spacy.blank("en")
    from_bytes.add_pipe("elmo")
    from_bytes.from_bytes(nlp.to_bytes())
    numpy.testing.assert_allclose(from_bytes(TEXTS[0])._.elmo_layers, before[0], atol=1e-6, rtol=0)


def test_bundled_default_is_used_without_config(tmp_path, monkeypatch, reference):
    import spacy_elmo.loaders as loaders

    monkeypatch.setattr(loaders, "DEFAULT_BILM_DIR", tmp_path / "missing")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    with pytest.raises(ElmoNoWeightsError, match="has no biLM weights"):
        nlp("text")
    bundled = tmp_path / "default_bilm"
    reference.to_files(bundled / "options.json", bundled / "weights.hdf5")
    monkeypatch.setattr(loaders, "DEFAULT_BILM_DIR", bundled)
    doc = nlp("Offline, with no config .")
    numpy.testing.assert_allclose(doc._.elmo_layers, reference.embed_batch([[t.text for t in doc]])[0], atol=1e-4)
    loaded = loaders.default_weights_v1()()
    assert loaded.options == reference.options


def _saved_model_bytes(nlp, path) -> bytes:
    nlp.to_disk(path)
    return (path / "elmo" / "model").read_bytes()


def test_saved_pipeline_holds_plain_arrays_and_keeps_float16_weights(tmp_path, reference):
    """No pickle in a saved pipeline; weights from a float16 file stay float16 (half the size)."""
    half = tmp_path / "half"
    reference.to_files(half / "options.json", half / "weights.hdf5", dtype="float16")
    nlp16 = spacy.blank("en")
    nlp16.add_pipe("elmo", config={"bilm_dir": str(half)})
    before = nlp16(TEXTS[1])._.elmo_layers  # (also loads the weights)
    data16 = _saved_model_bytes(nlp16, tmp_path / "p16")
    data32 = _saved_model_bytes(_float32_nlp(reference, tmp_path), tmp_path / "p32")
    assert b"PK\x03\x04" not in data16 and b"PK\x03\x04" not in data32  # no torch.save zip (pickle)
    assert len(data16) < 0.6 * len(data32)
    loaded = spacy.load(tmp_path / "p16")
    numpy.testing.assert_array_equal(loaded(TEXTS[1])._.elmo_layers, before)  # float16 -> float32 is exact


def _float32_nlp(reference, tmp_path):
    full = tmp_path / "full"
    reference.to_files(full / "options.json", full / "weights.hdf5")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": str(full)})
    nlp("warm up")  # load the weights
    return nlp


def test_a_damaged_saved_biLM_names_the_component_and_file(tmp_path, weight_files):
    from spacy_elmo.errors import ElmoWeightsError

    nlp = make_nlp(weight_files)
    data = _saved_model_bytes(nlp, tmp_path / "pipeline")
    (tmp_path / "pipeline" / "elmo" / "model").write_bytes(data[: len(data) // 2])
    with pytest.raises(ElmoWeightsError, match=r"component 'elmo': cannot load .*elmo/model: "):
        spacy.load(tmp_path / "pipeline")


def test_pipelines_saved_with_a_torch_state_still_load(reference):
    """spacy-elmo 0.1 saved the biLM as a torch.save zip inside the msgpack."""
    import io

    import srsly
    import torch

    from spacy_elmo.errors import ElmoWeightsError
    from spacy_elmo.layers.bilm_serialization import deserialize_bilm

    buffer = io.BytesIO()
    torch.save(reference.state_dict(), buffer)
    old = srsly.msgpack_dumps({"options": reference.options.to_dict(), "state": buffer.getvalue()})
    loaded = deserialize_bilm(None, old, torch.device("cpu"))
    sentence = ["Old", "pipelines", "load", "."]
    numpy.testing.assert_array_equal(loaded.embed_batch([sentence])[0], reference.embed_batch([sentence])[0])
    tampered = srsly.msgpack_dumps({"options": reference.options.to_dict(), "state": buffer.getvalue()[:100]})
    with pytest.raises(ElmoWeightsError, match="the saved biLM is damaged"):
        deserialize_bilm(None, tampered, torch.device("cpu"))


def test_fine_tuning_a_windowed_doc_sees_the_same_vectors_and_backpropagates(weight_files, reference):
    from spacy_elmo.layers.bilm_layer import build_bilm_model, get_bilm, set_bilm

    model = build_bilm_model(None, max_segment_length=8)
    set_bilm(model, reference)
    doc = Doc(spacy.blank("en").vocab, words=[f"w{i % 5}" for i in range(30)])
    predicted = model.predict([doc])[0]
    trained, backprop = model.begin_update([doc])
    numpy.testing.assert_allclose(model.ops.to_numpy(trained[0]), predicted, atol=1e-5)
    get_bilm(model).zero_grad()
    backprop([model.ops.xp.ones_like(trained[0])])
    grad = get_bilm(model).char_encoder.proj_weight.grad
    assert grad is not None and float(grad.abs().sum()) > 0


def _edit_saved_model(path, edit) -> None:
    """Rewrite a saved pipeline's elmo/model msgpack through ``edit(msg, bilm_msg)``."""
    import srsly

    model_file = path / "elmo" / "model"
    msg = srsly.msgpack_loads(model_file.read_bytes())
    shims = msg["shims"]
    index = next(i for i, node in enumerate(shims) if node)
    shim_msg = srsly.msgpack_loads(shims[index][0])  # thinc's PyTorchShim: {"config", "state"}
    bilm_msg = srsly.msgpack_loads(shim_msg["state"])
    edit(msg, bilm_msg)
    shim_msg["state"] = srsly.msgpack_dumps(bilm_msg)
    shims[index][0] = srsly.msgpack_dumps(shim_msg)
    model_file.write_bytes(srsly.msgpack_dumps(msg))


def _weights_loaded_attr_lost(msg, bilm_msg):
    for attrs in msg["attrs"]:
        attrs.pop("weights_loaded", None)


def _bilm_dropped(msg, bilm_msg):
    _weights_loaded_attr_lost(msg, bilm_msg)
    bilm_msg.clear()
    bilm_msg.update({"options": None, "arrays": {}})


@pytest.fixture
def saved_on_the_bundled_biLM(tmp_path, monkeypatch, reference):
    """A pipeline saved on the bundled biLM, which is then replaced by another one: a
    saved pipeline must run its own biLM, never whatever is bundled now."""
    import spacy_elmo.loaders as loaders

    bundled = tmp_path / "bundled"
    reference.to_files(bundled / "options.json", bundled / "weights.hdf5")
    monkeypatch.setattr(loaders, "DEFAULT_BILM_DIR", bundled)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    before = nlp(TEXTS[1])._.elmo_layers
    nlp.to_disk(tmp_path / "pipeline")
    other = tmp_path / "other"
    tiny_bilm(seed=77).to_files(other / "options.json", other / "weights.hdf5")
    monkeypatch.setattr(loaders, "DEFAULT_BILM_DIR", other)
    return tmp_path / "pipeline", before


def test_a_saved_pipeline_runs_its_own_biLM_even_if_its_attrs_are_lost(saved_on_the_bundled_biLM):
    path, before = saved_on_the_bundled_biLM
    _edit_saved_model(path, _weights_loaded_attr_lost)
    numpy.testing.assert_allclose(spacy.load(path)(TEXTS[1])._.elmo_layers, before, atol=1e-6, rtol=0)


def test_a_saved_pipeline_without_its_biLM_is_refused_not_run_on_the_bundled_one(saved_on_the_bundled_biLM):
    from spacy_elmo.errors import ElmoWeightsError

    path, _ = saved_on_the_bundled_biLM
    _edit_saved_model(path, _bilm_dropped)
    with pytest.raises(ElmoWeightsError, match=r"component 'elmo': cannot load .*elmo/model: it holds no biLM"):
        spacy.load(path)


def test_saving_a_pipe_before_first_use_saves_the_biLM_it_would_run(saved_on_the_bundled_biLM, tmp_path, reference):
    import spacy_elmo.loaders as loaders

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")  # no weights loaded yet: saving loads the (now other) bundled biLM
    nlp.to_disk(tmp_path / "unused")
    loaded = spacy.load(tmp_path / "unused")
    bundled_now = loaders.load_bilm(bilm_dir=loaders.DEFAULT_BILM_DIR)
    doc = loaded(TEXTS[2])
    numpy.testing.assert_allclose(doc._.elmo_layers, bundled_now.embed_batch([[t.text for t in doc]])[0], atol=1e-4)


def test_a_missing_saved_model_is_named(saved_on_the_bundled_biLM):
    from spacy_elmo.errors import ElmoFileNotFoundError

    path, _ = saved_on_the_bundled_biLM
    (path / "elmo" / "model").unlink()
    with pytest.raises(ElmoFileNotFoundError, match=r"component 'elmo': the saved pipeline lacks .*elmo/model"):
        spacy.load(path)


def test_load_time_settings_apply_over_the_saved_ones(tmp_path, weight_files):
    from spacy_elmo.layers.bilm_layer import get_bilm

    nlp = make_nlp(weight_files)
    nlp(TEXTS[0])
    nlp.to_disk(tmp_path / "pipeline")
    overrides = {"model": {"max_segment_length": 8}, "cache_size_mb": 0, "precision": "int8", "store": "mix"}
    loaded = spacy.load(tmp_path / "pipeline", config={"components": {"elmo": overrides}})
    elmo = loaded.get_pipe("elmo")
    assert elmo.settings.max_segment_length == 8
    assert elmo.model.attrs["cache"].max_bytes == 0
    assert elmo.settings.precision == "int8" and elmo.cfg["precision"] == "int8"
    assert elmo.cfg["store"] == "mix"
    assert get_bilm(elmo.model) is not None
    doc = loaded(TEXTS[0])  # the settings at work: the int8 mix, nothing else stored
    fresh = make_nlp(weight_files, precision="int8", store="mix", cache_size_mb=0)(TEXTS[0])
    assert doc._.elmo_layers is None and doc[0]._.elmo.shape == (16,)
    numpy.testing.assert_allclose(doc[0]._.elmo, fresh[0]._.elmo, atol=1e-6)
    unchanged = spacy.load(tmp_path / "pipeline").get_pipe("elmo")
    assert unchanged.settings.max_segment_length == DEFAULT_MAX_SEGMENT_LENGTH and unchanged.cfg["precision"] == "fp32"


def _nan_in_an_array(msg, bilm_msg):
    name = sorted(bilm_msg["arrays"])[0]
    array = numpy.array(bilm_msg["arrays"][name])
    array.flat[0] = numpy.nan
    bilm_msg["arrays"][name] = array
    bilm_msg.pop("sha256")  # as if saved before the checksum: the values are still checked


def _int_array(msg, bilm_msg):
    name = "char_encoder.proj_bias"
    bilm_msg["arrays"][name] = numpy.array(bilm_msg["arrays"][name]).astype(numpy.int32)
    bilm_msg.pop("sha256")


def _wrong_shape(msg, bilm_msg):
    name = "char_encoder.proj_bias"
    bilm_msg["arrays"][name] = numpy.zeros((3,), dtype=numpy.float32)
    bilm_msg.pop("sha256")


def _not_an_array(msg, bilm_msg):
    bilm_msg["arrays"]["char_encoder.proj_bias"] = "text"
    bilm_msg.pop("sha256")


def _missing_array(msg, bilm_msg):
    del bilm_msg["arrays"]["char_encoder.proj_bias"]
    bilm_msg.pop("sha256")


def _nan_cell_clip(msg, bilm_msg):
    bilm_msg["options"]["lstm"]["cell_clip"] = float("nan")


def _flipped_byte(msg, bilm_msg):
    name = "char_encoder.proj_bias"
    raw = bytearray(numpy.array(bilm_msg["arrays"][name]).tobytes())
    raw[1] ^= 0x10
    bilm_msg["arrays"][name] = numpy.frombuffer(bytes(raw), dtype=bilm_msg["arrays"][name].dtype)


@pytest.mark.parametrize(
    "edit,message",
    [
        (_nan_in_an_array, r"array '.*' contains NaN or infinite values"),
        (_int_array, r"array 'char_encoder.proj_bias' has dtype int32, expected floats"),
        (_wrong_shape, r"array 'char_encoder.proj_bias' has shape \(3,\) but its options need \(8,\)"),
        (_not_an_array, r"array 'char_encoder.proj_bias' is a str, not an array of floats"),
        (_flipped_byte, r"fails its sha256 check"),
        (_missing_array, r"arrays do not fit its options \(missing: \['char_encoder.proj_bias'\], unexpected: \[\]\)"),
        (_nan_cell_clip, r"option 'lstm.cell_clip' must be a finite number >= 0 \(0 = no clipping\), got nan"),
    ],
)
def test_damaged_saved_weights_are_refused_naming_the_file(tmp_path, weight_files, edit, message):
    from spacy_elmo.errors import ElmoWeightsError

    nlp = make_nlp(weight_files)
    nlp(TEXTS[0])
    nlp.to_disk(tmp_path / "pipeline")
    _edit_saved_model(tmp_path / "pipeline", edit)
    with pytest.raises(
        ElmoWeightsError, match=rf"^component 'elmo': cannot load .*elmo/model: the saved biLM.*{message}"
    ) as info:
        spacy.load(tmp_path / "pipeline")
    assert "\n" not in str(info.value)


def test_a_failed_load_keeps_the_biLM_the_pipe_had(tmp_path, weight_files, reference):
    from spacy_elmo.errors import ElmoWeightsError
    from spacy_elmo.layers.bilm_layer import get_bilm

    nlp = make_nlp(weight_files)
    before = nlp(TEXTS[0])._.elmo_layers
    nlp.to_disk(tmp_path / "pipeline")
    _edit_saved_model(tmp_path / "pipeline", _flipped_byte)
    with pytest.raises(ElmoWeightsError, match="sha256"):
        nlp.from_disk(tmp_path / "pipeline")
    assert get_bilm(nlp.get_pipe("elmo").model) is not None
    numpy.testing.assert_array_equal(nlp(TEXTS[0])._.elmo_layers, before)


@pytest.mark.parametrize("store", ["all", "mix"])
def test_token_mix_weights_whose_sum_overflows_still_mix(weight_files, store):
    """[1e308, 1e308, 1] sums to inf in float64: normalised naively every weight was 0."""
    layers = make_nlp(weight_files)(TEXTS[1])._.elmo_layers
    doc = make_nlp(weight_files, token_mix=[1e308, 1e308, 1.0], store=store)(TEXTS[1])
    numpy.testing.assert_allclose(doc[3]._.elmo, 0.5 * layers[0, 3] + 0.5 * layers[1, 3], atol=1e-6)
    assert numpy.abs(doc[3]._.elmo).max() > 0


def elmo_component(**settings):
    """The component built directly: spaCy's config check refuses inf/NaN and bools before it."""
    from spacy_elmo.pipeline.elmo import DEFAULT_ELMO_MODEL, ElmoComponent

    model = spacy.registry.resolve({"model": DEFAULT_ELMO_MODEL})["model"]
    return ElmoComponent(spacy.blank("en").vocab, model, **settings)


@pytest.mark.parametrize("bad", [[float("inf"), 1.0, 1.0], [float("nan"), 1.0, 1.0], ["1", 2, 3], [True, 1, 1]])
def test_token_mix_weights_that_are_not_finite_numbers_are_refused(bad):
    with pytest.raises(ElmoError, match="token_mix must be non-negative layer weights with a positive sum"):
        elmo_component(token_mix=bad)


@pytest.mark.parametrize("weights", [[1.0, 2.0], [1.0, 1.0, 1.0, 1.0]])
def test_a_token_mix_of_another_length_than_the_layers_is_refused_when_the_weights_load(weight_files, weights):
    nlp = make_nlp(weight_files, token_mix=weights)
    message = rf"elmo token_mix has {len(weights)} weights, but the biLM gives 3 layers"
    with pytest.raises(ElmoError, match=message):
        nlp.initialize()
    with pytest.raises(ElmoError, match=message):
        make_nlp(weight_files, token_mix=weights)(TEXTS[0])


def test_a_saved_pipeline_loaded_with_a_token_mix_of_another_length_is_refused(tmp_path, weight_files):
    nlp = make_nlp(weight_files)
    nlp(TEXTS[0])
    nlp.to_disk(tmp_path / "pipeline")
    with pytest.raises(ElmoError, match="elmo token_mix has 2 weights, but the biLM gives 3 layers"):
        spacy.load(tmp_path / "pipeline", config={"components": {"elmo": {"token_mix": [1.0, 2.0]}}})


def test_a_cache_size_that_is_not_a_number_is_refused():
    # spaCy's config check lets "10" through (it converts it only to check it); a bool it refuses itself.
    # confection before 1.0 (spaCy 3.8.2 at the declared floors) passes the converted 10 on instead.
    expected = r"elmo cache_size_mb must be a number of megabytes \(0: no cache\), got "
    if int(importlib.metadata.version("confection").split(".")[0]) < 1:
        assert spacy.blank("en").add_pipe("elmo", config={"cache_size_mb": "10"}).name == "elmo"
    else:
        with pytest.raises(ElmoError, match=expected + "'10'"):
            spacy.blank("en").add_pipe("elmo", config={"cache_size_mb": "10"})
    for bad in (True, None, [10]):
        with pytest.raises(ElmoError, match=expected + re.escape(repr(bad))):
            elmo_component(cache_size_mb=bad)


# -- spaCy's own vector API: Token/Span/Doc .vector, .has_vector, .similarity -------------
def cosine(a, b) -> float:
    return float(numpy.dot(a, b) / (numpy.linalg.norm(a) * numpy.linalg.norm(b)))


@pytest.mark.parametrize("store,dtype", [("all", "float32"), ("all", "float16"), ("mix", "float32")])
def test_spacy_vectors_are_the_elmo_mix_and_similarity_their_cosine_without_warnings(
    weight_files, store, dtype, recwarn
):
    nlp = make_nlp(weight_files, store=store, store_dtype=dtype, token_mix=[0.0, 1.0, 3.0])
    doc, other = nlp(TEXTS[1]), nlp(TEXTS[0])
    mixes = numpy.stack([token._.elmo for token in doc])
    assert doc.has_vector and doc[3].has_vector and doc[2:5].has_vector and not doc[2:2].has_vector
    numpy.testing.assert_array_equal(doc[3].vector, doc[3]._.elmo)
    numpy.testing.assert_allclose(doc[2:5].vector, mixes[2:5].mean(axis=0), rtol=1e-6)
    numpy.testing.assert_allclose(doc.vector, mixes.mean(axis=0), rtol=1e-6)
    assert doc.vector.dtype == numpy.float32 and doc.vector.shape == (16,)
    assert doc.vector_norm == pytest.approx(numpy.linalg.norm(mixes.mean(axis=0)), rel=1e-6)
    assert doc[2:2].vector.shape == (16,) and not doc[2:2].vector.any()
    assert doc.similarity(other) == pytest.approx(cosine(doc.vector, other.vector), rel=1e-6)
    assert doc[2:5].similarity(other[0:3]) == pytest.approx(cosine(doc[2:5].vector, other[0:3].vector), rel=1e-6)
    assert doc[3].similarity(other[2]) == pytest.approx(cosine(doc[3].vector, other[2].vector), rel=1e-6)
    assert doc[3].similarity(doc) == pytest.approx(cosine(doc[3].vector, doc.vector), rel=1e-6)
    assert 0 < abs(doc.similarity(other)) < 1  # the contextual cosine, not spaCy's 0.0 or 1.0
    numpy.testing.assert_array_equal(doc.copy().vector, doc.vector)  # a copy keeps the hooks and the mix
    assert not doc[1:].as_doc().has_vector  # spaCy's as_doc keeps the hooks but not doc.user_data
    numpy.testing.assert_array_equal(pickle.loads(pickle.dumps(doc)).vector, doc.vector)
    assert not [str(w.message) for w in recwarn.list]  # neither W007 nor W008


def test_the_same_word_in_two_contexts_is_not_similarity_1(weight_files):
    nlp = make_nlp(weight_files)
    a, b = nlp("the bank of the river"), nlp("a bank lends money")
    assert a[1].text == b[1].text and a[1].similarity(b[1]) == pytest.approx(cosine(a[1].vector, b[1].vector))
    assert a[1].similarity(b[1]) < 0.9999


def test_store_none_or_the_switch_off_leave_spacys_own_vectors(weight_files):
    for settings in ({"store": "none"}, {"vector_hooks": False}):
        doc = make_nlp(weight_files, **settings)(TEXTS[0])
        assert not doc.user_hooks and not doc.user_token_hooks and not doc.user_span_hooks
        assert not doc.has_vector and doc[0].vector.shape == (0,)
        with pytest.warns(UserWarning) as caught:
            assert doc.similarity(doc[0:2]) == 0.0
        assert [str(w.message)[:6] for w in caught] == ["[W007]", "[W008]"]


def test_static_vectors_win_over_the_elmo_mix(weight_files):
    nlp = make_nlp(weight_files)
    nlp.vocab.set_vector("Alice", numpy.arange(5, dtype="float32"))
    doc = nlp(TEXTS[0])
    assert not doc.user_hooks and not doc.user_token_hooks and not doc.user_span_hooks
    numpy.testing.assert_array_equal(doc[0].vector, numpy.arange(5, dtype="float32"))
    assert doc._.elmo_layers.shape == (3, len(doc), 16)  # the layers are still there


def test_the_vector_switch_is_a_setting_saved_and_loaded_with_the_pipeline(weight_files, tmp_path):
    nlp = make_nlp(weight_files)
    assert nlp.get_pipe("elmo").cfg["vector_hooks"] is True
    nlp.to_disk(tmp_path / "on")
    loaded = spacy.load(tmp_path / "on")
    doc = loaded(TEXTS[0])
    numpy.testing.assert_array_equal(doc[1].vector, doc[1]._.elmo)
    off = spacy.load(tmp_path / "on", config={"components": {"elmo": {"vector_hooks": False}}})
    assert off.get_pipe("elmo").cfg["vector_hooks"] is False and not off(TEXTS[0]).has_vector
    off.to_disk(tmp_path / "off")
    assert spacy.load(tmp_path / "off").config["components"]["elmo"]["vector_hooks"] is False
    assert not spacy.load(tmp_path / "off")(TEXTS[0]).user_token_hooks
    with pytest.raises(ElmoError, match="elmo vector_hooks must be true or false, got 'yes'"):
        elmo_component(vector_hooks="yes")


def test_a_docbin_keeps_the_mix_but_not_the_hooks_which_add_vector_hooks_restores(weight_files):
    from spacy.tokens import DocBin

    from spacy_elmo.pipeline import add_vector_hooks

    nlp = make_nlp(weight_files, store="mix")
    doc = nlp(TEXTS[0])
    (back,) = DocBin(store_user_data=True, docs=[doc]).get_docs(nlp.vocab)
    assert not back.user_token_hooks  # spaCy's DocBin does not carry user hooks
    add_vector_hooks(back)
    numpy.testing.assert_array_equal(back[2].vector, doc[2].vector)
    assert back.similarity(doc) == pytest.approx(1.0, rel=1e-6)
    with pytest.raises(ElmoError, match="carries no ELMo vectors"):
        add_vector_hooks(nlp.make_doc("no elmo here"))


def test_doc_from_docs_drops_the_elmo_data_and_the_component_gives_the_joined_doc_its_own(weight_files):
    """docs/component.md: spaCy's Doc.from_docs keeps only per-token and per-span extension
    values (W102 for the rest), so the joined doc has no ELMo; running elmo on it gives it layers."""
    nlp = make_nlp(weight_files)
    docs = [nlp(text) for text in ("Alice visited Berlin .", "Bob stayed .")]
    with pytest.warns(UserWarning, match="W102"):
        joined = Doc.from_docs(docs)
    assert joined._.elmo_layers is None and joined[0]._.elmo is None
    layers = nlp.get_pipe("elmo")(joined)._.elmo_layers
    assert layers.shape[1] == len(joined) == 7


def test_a_pipeline_saved_by_spacy_elmo_0_2_0_loads_predicts_the_same_and_saves_the_same_bytes(tmp_path):
    import json
    from pathlib import Path

    saved = Path(__file__).parent / "data" / "saved_pipelines"
    expected = json.loads((saved / "0.2.0.json").read_text())
    nlp = spacy.load(saved / "0.2.0")
    docs = list(nlp.pipe(expected["texts"]))
    assert [float(doc._.elmo_layers.astype("float64").sum()) for doc in docs] == pytest.approx(
        expected["layers_sum"], rel=1e-6
    )
    assert [[[e.start, e.end, e.label_] for e in doc.ents] for doc in docs] == expected["ents"]
    rows = [
        float(numpy.asarray(x, dtype="float64").sum())
        for x in nlp.get_pipe("ner").model.get_ref("tok2vec").predict(docs)
    ]
    assert rows == pytest.approx(expected["ner_tok2vec_sum"], rel=1e-5, abs=1e-6)
    nlp.to_disk(tmp_path / "again")
    assert (tmp_path / "again" / "elmo" / "model").read_bytes() == (saved / "0.2.0" / "elmo" / "model").read_bytes()
