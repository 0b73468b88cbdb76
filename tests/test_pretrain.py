"""Pretraining: the objective, the softmaxes, resume, export, fine-tuning, errors."""

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy
import pytest
import torch

from spacy_elmo.bilm import ElmoBiLM, ElmoOptionsError
from spacy_elmo.bilm.language_model import BidirectionalLM
from spacy_elmo.bilm.lm_head import AdaptiveSoftmax, FullSoftmax, SampledSoftmax
from spacy_elmo.bilm.lstm import ProjectedLstm
from spacy_elmo.files.json_files import read_jsonl
from spacy_elmo.pretrain import PretrainConfigError, PretrainDataError, Vocabulary, load_config, pretrain
from spacy_elmo.pretrain.batches import epoch_batches, make_batch
from spacy_elmo.pretrain.config import Schedule
from spacy_elmo.pretrain.corpus import Corpus
from spacy_elmo.pretrain.outputs import load_checkpoint, save_checkpoint
from spacy_elmo.pretrain.perplexity import perplexity
from spacy_elmo.pretrain.train import make_optimizer, train_step, with_step_implementation

from .conftest import PRETRAIN_SENTENCES, REFERENCE, tiny_bilm
from .lstm_reference import autograd_lstm

ROOT = Path(__file__).parent.parent
TINY = ROOT / "configs" / "pretrain_tiny.cfg"
SENTENCES = PRETRAIN_SENTENCES


def run(output_dir, train, dev=None, **overrides):
    settings = {"paths.train": str(train), "paths.dev": str(dev) if dev else None}
    settings.update(overrides)
    return pretrain(load_config(TINY, settings), output_dir, progress=False)


def losses(output_dir):
    return [r["loss"] for r in read_jsonl(Path(output_dir) / "metrics.jsonl") if "loss" in r]


# -- the objective and the softmaxes ---------------------------------------
@pytest.mark.parametrize("softmax", ["full", "sampled", "adaptive"])
def test_loss_falls_on_repeated_text(tmp_path, text_files, softmax):
    train, dev = text_files
    summary = run(tmp_path / "out", train, dev, **{"training.softmax": softmax})
    curve = losses(tmp_path / "out")
    assert curve[-1] < 0.5 * curve[0], curve
    # 29 words: a model that learned nothing scores about 29 on dev.
    assert summary["dev_perplexity"]["mean"] < 6.0


def test_lm_targets_are_next_and_previous_words():
    """Forward predicts position t+1, backward t-1, boundaries included; padding ignored."""
    bilm = tiny_bilm()
    torch.manual_seed(0)
    lm = BidirectionalLM(bilm, FullSoftmax(8, 10)).eval()
    corpus = Corpus()
    sentences = [corpus.encode("a b c".split()), corpus.encode(["d"])]
    words = numpy.arange(len(corpus.types)) + 3  # type i -> word i + 3 (any fixed map)
    chars, index, word_ids, lengths = make_batch(sentences, corpus.type_chars, words)
    hidden, targets = lm._predictions(chars, index, word_ids, lengths, 0.0)
    # 4 + 2 predictions per direction
    assert hidden.shape == (12, 8)
    row0 = word_ids[0].tolist()  # <S> a b c </S>
    row1 = word_ids[1, :3].tolist()  # <S> d </S>
    assert targets.tolist() == row0[1:] + row1[1:] + row0[:-1] + row1[:-1]
    # The states are those of the stateless biLM run on each sentence alone.
    top = bilm.embed_batch([["a", "b", "c"]])[0][-1]  # (3, 2P)
    assert numpy.allclose(hidden[1:4].detach().numpy(), top[:, :8], atol=1e-5)  # forward at a, b, c
    assert numpy.allclose(hidden[6:9].detach().numpy(), top[:, 8:], atol=1e-5)  # backward at a, b, c


def test_sampled_softmax_samples_log_uniform_and_evaluates_exactly():
    torch.manual_seed(0)
    head = SampledSoftmax(4, 1000, n_samples=50)
    samples = torch.cat([head.sample(torch.device("cpu")) for _ in range(400)])
    ranks = torch.bincount(samples, minlength=1000).double() / len(samples)
    expected = (math.log(2) - math.log(1)) / math.log(1001)
    assert abs(ranks[0].item() - expected) < 0.01
    assert ranks[:10].sum() > ranks[500:].sum()
    hidden, targets = torch.randn(6, 4), torch.tensor([0, 5, 17, 999, 3, 3])
    exact = -head.target_log_probs(hidden, targets)
    full = torch.nn.functional.cross_entropy(hidden @ head.weight.t() + head.bias, targets, reduction="none")
    assert torch.allclose(exact, full, atol=1e-5)
    head.eval()
    assert torch.allclose(head(hidden, targets), full, atol=1e-5)  # eval mode: the full softmax
    head.train()
    assert not torch.allclose(head(hidden, targets), full, atol=1e-3)


def test_adaptive_softmax_probabilities_sum_to_one():
    torch.manual_seed(0)
    head = AdaptiveSoftmax(16, 50, cutoffs=[10, 30, 200], div_value=4.0)  # 200 is past the vocabulary: dropped
    assert head.cutoffs == [10, 30]
    hidden = torch.randn(3, 16)
    total = torch.stack([head.target_log_probs(hidden, torch.full((3,), w)).exp() for w in range(50)]).sum(0)
    assert torch.allclose(total, torch.ones(3), atol=1e-5)
    with pytest.raises(ElmoOptionsError, match="cluster 2 would have width 0"):
        AdaptiveSoftmax(4, 50, cutoffs=[10, 30], div_value=4.0)


def test_fused_lstm_gradients_equal_step_by_step_autograd():
    torch.manual_seed(0)
    for clip in (3.0, 0.0, 0.05):  # 0.05: the clips really fire
        layer = ProjectedLstm(6, 10, 5, clip, clip)
        with torch.no_grad():
            for param in layer.parameters():
                param.copy_(torch.randn_like(param))
        x = torch.randn(7, 3, 6, requires_grad=True)
        weights = torch.randn(7, 3, 5)
        out, _ = layer(x)
        (out * weights).sum().backward()
        fused = [x.grad.clone()] + [p.grad.clone() for p in layer.parameters()]
        for tensor in [x, *layer.parameters()]:
            tensor.grad = None
        gates = torch.addmm(layer.bias + layer.forget_offset, x.reshape(21, -1), layer.input_weight).view(7, 3, -1)
        reference, _ = autograd_lstm(layer, gates, layer.zero_state(3, x))
        (reference * weights).sum().backward()
        stepwise = [x.grad.clone()] + [p.grad.clone() for p in layer.parameters()]
        assert torch.allclose(out, reference, atol=1e-6)
        for a, b in zip(fused, stepwise):
            assert torch.allclose(a, b, atol=1e-5), (clip, (a - b).abs().max())


def _random_lstm(clip: float, scale: float = 1.0) -> ProjectedLstm:
    layer = ProjectedLstm(6, 10, 5, clip, clip)
    with torch.no_grad():
        for param in layer.parameters():
            param.copy_(torch.randn_like(param) * scale)
    return layer


def test_fused_lstm_gives_final_states_without_gradient_and_the_reference_gradients():
    """With lengths (a stateful biLM: final states wanted) training runs the fused node too,
    from a given state; each row's final (h, c) is the reference's, detached."""
    torch.manual_seed(0)
    lengths = torch.tensor([7, 4, 1])
    for clip in (3.0, 0.05):
        layer = _random_lstm(clip)
        x = torch.randn(7, 3, 6, requires_grad=True)
        start = (torch.randn(3, 5), torch.randn(3, 10))
        weights = torch.randn(7, 3, 5)
        out, (h, c) = layer(x, start, lengths)
        assert type(out.grad_fn).__name__ == "_FusedLstmSequenceBackward"
        assert not h.requires_grad and not c.requires_grad
        (out * weights).sum().backward()
        fused = [x.grad.clone()] + [p.grad.clone() for p in layer.parameters()]
        for tensor in [x, *layer.parameters()]:
            tensor.grad = None
        gates = torch.addmm(layer.bias + layer.forget_offset, x.reshape(21, -1), layer.input_weight).view(7, 3, -1)
        reference, (ref_h, ref_c) = autograd_lstm(layer, gates, start, lengths)
        (reference * weights).sum().backward()
        torch.testing.assert_close(out, reference, atol=1e-6, rtol=0)
        torch.testing.assert_close(h, ref_h.detach(), atol=1e-6, rtol=0)
        torch.testing.assert_close(c, ref_c.detach(), atol=1e-6, rtol=0)
        assert not torch.equal(c[0], c[1])  # rows ending at different steps
        for a, b in zip(fused, [x.grad] + [p.grad for p in layer.parameters()]):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_fused_lstm_under_fp16_autocast_runs_fp32_in_one_node_and_returns_fp16():
    torch.manual_seed(0)
    layer = _random_lstm(3.0, scale=0.5)
    x = torch.randn(7, 3, 6, requires_grad=True)
    exact, _ = layer(x)
    with torch.autocast("cpu", dtype=torch.float16):
        half, _ = layer(x)
    assert half.dtype == torch.float16
    assert type(half.grad_fn.next_functions[0][0]).__name__ == "_FusedLstmSequenceBackward"
    torch.testing.assert_close(half.float(), exact.detach(), atol=2e-3, rtol=2e-3)
    half.float().sum().backward()
    assert layer.state_weight.grad is not None and layer.state_weight.grad.dtype == torch.float32


def test_fused_lstm_under_bf16_autocast_is_one_node_in_bf16_close_to_fp32():
    """bf16 pretraining runs the same fused node with bf16 GEMM operands (not autocast's
    step-by-step ops); gradients stay fp32, and outputs and gradients near the fp32 ones."""
    torch.manual_seed(0)
    for clip in (3.0, 0.0):
        layer = ProjectedLstm(6, 10, 5, clip, clip)
        with torch.no_grad():
            for param in layer.parameters():
                param.copy_(torch.randn_like(param) * 0.5)
        x = torch.randn(7, 3, 6, requires_grad=True)
        weights = torch.randn(7, 3, 5)
        results = {}
        for precision in ("fp32", "bf16"):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                out, _ = layer(x)
            (out * weights).sum().backward()
            results[precision] = [out.detach().float()] + [t.grad.clone() for t in (x, *layer.parameters())]
            node = out.grad_fn if precision == "fp32" else out.grad_fn.next_functions[0][0]  # under the cast to bf16
            assert out.dtype == {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
            assert type(node).__name__ == "_FusedLstmSequenceBackward"
            for tensor in [x, *layer.parameters()]:
                tensor.grad = None
        for exact, half in zip(results["fp32"], results["bf16"]):
            assert half.dtype == torch.float32
            assert not torch.equal(exact, half)  # bf16 really ran
            assert (half - exact).norm() <= 0.03 * exact.norm(), (clip, (half - exact).norm() / exact.norm())


def test_bf16_fused_lstm_widens_a_step_at_a_time_never_the_whole_sequence():
    """The bf16 node widens each step's bf16 GEMM results into fp32 buffers of its own and
    keeps the bf16 operands it rounds for the weight gradients: no cast of a whole
    sequence's gates (T * B, 4C), forward or backward, which cost ~10% of a bf16 step."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    layer = ProjectedLstm(6, 10, 5, 3.0, 3.0)
    x = torch.randn(7, 3, 6, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, _ = layer(x)
        out.float().sum().backward()
    copied = [tuple(e.input_shapes[0]) for e in prof.key_averages(group_by_input_shape=True) if e.key == "aten::copy_"]
    step_gates = (3, 40)
    assert step_gates in copied  # the per-step widening ran (the profile sees copies)
    assert not {(21, 40), (7, 3, 40)} & set(copied), copied
    assert layer.input_weight.grad is not None and layer.input_weight.grad.dtype == torch.float32


def _tiny_lm_and_batch():
    torch.manual_seed(0)
    lm = BidirectionalLM(tiny_bilm(), FullSoftmax(8, 10)).train()
    corpus = Corpus()
    sentences = [corpus.encode("a b c".split()), corpus.encode("d b".split())]
    words = numpy.arange(len(corpus.types)) % 7 + 3
    return lm, make_batch(sentences, corpus.type_chars, words)


def test_a_fused_adam_step_reaches_the_packed_inference_kernels():
    """The fused update leaves version counters alone; make_optimizer's step hook bumps
    them, or evaluation would run the packed copies of the weights before the step."""
    lm, batch = _tiny_lm_and_batch()
    optimizer = make_optimizer(load_config(TINY, {"paths.train": "unused"}), lm)
    assert optimizer.param_groups[0]["fused"]
    with torch.no_grad():
        before = lm.bilm.embed_batch([["a", "b", "c"]])[0]  # packs the kernels
    train_step(lm, optimizer, batch, dropout=0.0, grad_clip=10.0)
    with torch.no_grad():
        after = lm.bilm.embed_batch([["a", "b", "c"]])[0]
        fresh = copy.deepcopy(lm.bilm).embed_batch([["a", "b", "c"]])[0]  # a copy packs afresh
    assert not numpy.allclose(before, after)
    assert numpy.allclose(after, fresh, atol=1e-6)


def test_a_checkpoint_of_the_per_op_adam_resumes_with_the_fused_kernel():
    """Checkpoints written before pretraining used the fused kernel load into it, and
    the next step is the one the per-op optimizer would have taken."""
    lm, batch = _tiny_lm_and_batch()
    params = list(lm.parameters())
    per_op = torch.optim.AdamW(params, lr=0.01)
    train_step(lm, per_op, batch, dropout=0.0, grad_clip=10.0)
    saved = copy.deepcopy(per_op.state_dict())
    twin = copy.deepcopy(lm)
    fused = make_optimizer(load_config(TINY, {"paths.train": "unused", "training.learn_rate": 0.01}), twin)
    fused.load_state_dict(with_step_implementation(saved, fused))
    assert fused.param_groups[0]["fused"] and saved["param_groups"][0]["fused"] is None
    train_step(lm, per_op, batch, dropout=0.0, grad_clip=10.0)
    train_step(twin, fused, batch, dropout=0.0, grad_clip=10.0)
    for a, b in zip(lm.parameters(), twin.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


# -- vocabulary and corpus --------------------------------------------------
def test_vocabulary_is_frequency_sorted_with_specials_first(tmp_path):
    corpus = Corpus()
    sentences = [corpus.encode("b a b c b a".split()), corpus.encode("d".split())]
    vocab = Vocabulary.build(corpus.types, corpus.type_counts(sentences), min_count=1, max_size=5)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "b", "a"]
    assert vocab.ids(["a", "zzz", "</S>"]).tolist() == [4, 2, 1]
    vocab.to_file(tmp_path / "vocab.txt")
    assert Vocabulary.from_file(tmp_path / "vocab.txt").words == vocab.words
    assert Vocabulary.build(corpus.types, corpus.type_counts(sentences), min_count=2).words[3:] == ["b", "a"]


def test_corpus_reads_lines_paragraphs_docbins_and_directories(tmp_path):
    import spacy
    from spacy.tokens import DocBin

    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("one two three\n\nfour five\n", encoding="utf8")
    nlp = spacy.blank("en")
    DocBin(docs=[nlp("Hello there. General Kenobi!")]).to_disk(folder / "b.spacy")
    (folder / ".hidden.txt").write_text("never read\n", encoding="utf8")
    corpus = Corpus()
    sentences = corpus.read(folder, max_sentence_length=2)
    texts = [[corpus.types[i] for i in s] for s in sentences]
    # lines, cut into pieces of 2; then the DocBin (no sentence boundaries: one piece per 2 tokens)
    assert texts[:3] == [["one", "two"], ["three"], ["four", "five"]]
    assert ["Hello", "there"] in texts and "never" not in corpus.types
    raw = tmp_path / "raw.txt"
    raw.write_text("The first sentence. The second one!\nSame paragraph.\n\nNew paragraph here.\n", encoding="utf8")
    corpus = Corpus()
    sentences = corpus.read(raw, text_format="paragraphs")
    assert [[corpus.types[i] for i in s] for s in sentences] == [
        ["The", "first", "sentence", "."],
        ["The", "second", "one", "!"],
        ["Same", "paragraph", "."],
        ["New", "paragraph", "here", "."],
    ]


def test_batches_cover_each_sentence_once_within_the_token_budget():
    lengths = numpy.random.default_rng(0).integers(1, 40, size=500)
    batches = epoch_batches(lengths, 200, seed=3, epoch=1)
    assert sorted(numpy.concatenate(batches).tolist()) == list(range(500))
    assert all(lengths[b].sum() <= 200 for b in batches)
    again = epoch_batches(lengths, 200, seed=3, epoch=1)
    assert all((a == b).all() for a, b in zip(batches, again))
    other = epoch_batches(lengths, 200, seed=3, epoch=2)
    assert any(len(a) != len(b) or (a != b).any() for a, b in zip(batches, other))


def test_epochs_with_fewer_batches_than_the_first(tmp_path, text_files, monkeypatch):
    """Each epoch shuffles before batching, so batch counts differ between
    epochs; a later, shorter epoch must end at its own count."""
    import spacy_elmo.pretrain.train as train_module

    served = {}

    def uneven_batches(lengths, batch_tokens, seed, epoch):
        batches = epoch_batches(lengths, batch_tokens, seed, epoch)
        batches = batches[: len(batches) - 2] if epoch % 2 else batches
        served[epoch] = len(batches)
        return batches

    monkeypatch.setattr(train_module, "epoch_batches", uneven_batches)
    train, _ = text_files
    first = len(epoch_batches([len(s.split()) for s in SENTENCES * 12], 64, 0, 0))
    steps = 2 * first - 2 + 1  # all of epoch 0, all of the shorter epoch 1, one step of epoch 2
    summary = run(tmp_path / "out", train, **{"training.batch_size": 64, "training.max_steps": steps})
    assert served == {0: first, 1: first - 2, 2: first}
    assert summary["epochs_completed"] == 2
    assert load_checkpoint(tmp_path / "out" / "checkpoint.pt")["position"] == 1


# -- checkpoints, resume, outputs ---------------------------------------------
def test_interrupted_and_resumed_run_ends_where_an_uninterrupted_one_does(tmp_path, text_files):
    train, dev = text_files
    settings = {
        "training.dropout": 0.2,
        "training.softmax": "sampled",
        "training.checkpoint_every_steps": 100,
        "training.batch_size": 64,
    }
    run(tmp_path / "straight", train, dev, **{"training.max_steps": 14, **settings})
    run(tmp_path / "resumed", train, dev, **{"training.max_steps": 6, **settings})
    first = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")
    assert first["step"] == 6 and first["position"] > 0
    summary = run(tmp_path / "resumed", train, dev, **{"training.max_steps": 14, **settings})
    assert summary["steps"] == 14
    assert "max_steps = 14" in (tmp_path / "resumed" / "config.cfg").read_text()
    a = load_checkpoint(tmp_path / "straight" / "checkpoint.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")
    assert (a["epoch"], a["position"]) == (b["epoch"], b["position"])
    for name, tensor in a["model"].items():
        assert torch.allclose(tensor, b["model"][name], atol=1e-6), name
    # The metrics continue the step count without duplicates.
    steps = [r["step"] for r in read_jsonl(tmp_path / "resumed" / "metrics.jsonl") if "loss" in r]
    # (the first run logged its last step, 6; the resumed one logs 7-10 as step 10)
    assert steps == [5, 6, 10, 14]
    straight, resumed = losses(tmp_path / "straight"), losses(tmp_path / "resumed")
    assert (resumed[0], resumed[-1]) == pytest.approx((straight[0], straight[-1]), rel=1e-5)
    tokens = [
        [r["tokens"] for r in read_jsonl(tmp_path / name / "metrics.jsonl") if "loss" in r]
        for name in ("straight", "resumed")
    ]
    assert tokens[0][-1] == tokens[1][-1] > tokens[0][0] > 0


def test_resume_refuses_other_settings(tmp_path, text_files):
    train, dev = text_files
    run(tmp_path / "out", train, dev, **{"training.max_steps": 2})
    with pytest.raises(PretrainConfigError, match="training.learn_rate: 0.05 in the checkpoint, 0.5 now"):
        run(tmp_path / "out", train, dev, **{"training.max_steps": 4, "training.learn_rate": 0.5})
    train.write_text(train.read_text(encoding="utf8") + "one more line\n", encoding="utf8")
    with pytest.raises(PretrainConfigError, match="trained on other text: .*train.txt changed"):
        run(tmp_path / "out", train, dev, **{"training.max_steps": 4})


def test_the_schedule_warms_up_stays_constant_then_cools_down_to_max_steps():
    assert [Schedule(0.1, 2, 10, 4)(s) for s in range(10)] == pytest.approx(
        [0.05, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.075, 0.05, 0.025]
    )
    assert [Schedule(0.1, 2, 10, 0)(s) for s in range(10)] == pytest.approx([0.05] + [0.1] * 9)
    # A cooldown over a warm-up: the lower of the two.
    assert [Schedule(0.1, 4, 4, 4)(s) for s in range(4)] == pytest.approx([0.025, 0.05, 0.05, 0.025])
    for bad in (-1, 11, 2.5):
        with pytest.raises(PretrainConfigError, match="training.cooldown_steps must be an integer from 0 to"):
            load_config(TINY, {"paths.train": "t.txt", "training.max_steps": 10, "training.cooldown_steps": bad})


def test_a_cooldown_set_for_the_last_stretch_decays_from_the_checkpoint_and_cannot_reach_back(tmp_path, text_files):
    train, dev = text_files
    out = tmp_path / "out"
    every_step = {"training.log_every_steps": 1}
    run(out, train, dev, **every_step, **{"training.max_steps": 4})
    # As a checkpoint written before the cooldown existed (such runs resume with one).
    config_file = out / "config.cfg"
    config_file.write_text(config_file.read_text().replace("cooldown_steps = 0\n", ""))
    assert "cooldown_steps" not in config_file.read_text()
    with pytest.raises(
        PretrainConfigError,
        match=r"cooldown_steps = 4 would decay the learning rate from step 2 .* checkpoint's step 4",
    ):
        run(out, train, dev, **every_step, **{"training.max_steps": 6, "training.cooldown_steps": 4})
    run(out, train, dev, **every_step, **{"training.max_steps": 8, "training.cooldown_steps": 4})
    rates = [r["learn_rate"] for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    assert rates == pytest.approx([0.05] * 5 + [0.0375, 0.025, 0.0125])
    assert "cooldown_steps = 4" in (out / "config.cfg").read_text()
    # Once the cooldown has begun, the run cannot be extended (its steps would have had other rates).
    with pytest.raises(PretrainConfigError, match=r"in its cooldown since step 4: resume with training.max_steps = 8"):
        run(out, train, dev, **every_step, **{"training.max_steps": 12, "training.cooldown_steps": 4})
    assert run(out, train, dev, **every_step, **{"training.max_steps": 8, "training.cooldown_steps": 4})["steps"] == 8


def test_resume_accepts_the_same_paths_spelled_otherwise(tmp_path, text_files, monkeypatch):
    """A run started with absolute paths resumes when given relative ones (and back)."""
    train, dev = text_files
    run(tmp_path / "out", train, dev, **{"training.max_steps": 2})
    monkeypatch.chdir(train.parent)
    summary = run(tmp_path / "out", Path(train.name), Path(os.path.relpath(dev)), **{"training.max_steps": 3})
    assert summary["steps"] == 3


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"step": 1, "weights": torch.ones(3)})

    def dies_midway(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"step": 2, "weights": torch.zeros(3)})
    assert load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"\x00garbage")
    with pytest.raises(PretrainDataError, match="checkpoint cannot be read.*delete it"):
        load_checkpoint(path)


@pytest.mark.parametrize("present", [(), ("vocab.txt",)])
def test_perplexity_of_a_biLM_without_its_LM_head_says_so_in_one_line(tmp_path, monkeypatch, present):
    """As the bundled biLM ships (its LM head left out): one line saying what is missing and what works."""
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    bilm_dir = tmp_path / "bilm"
    tiny_bilm().to_files(bilm_dir / "options.json", bilm_dir / "weights.hdf5")
    for name in present:
        (bilm_dir / name).write_text("the\n")
    text = tmp_path / "text.txt"
    text.write_text("the cat sat .\n")
    monkeypatch.setattr(ElmoBiLM, "from_dir", lambda *a, **k: pytest.fail("the biLM was loaded"))
    result = CliRunner().invoke(app, ["perplexity", str(bilm_dir), str(text)])
    assert result.exit_code == 1
    missing = "softmax.hdf5" if present else "vocab.txt or softmax.hdf5"
    assert result.stderr.splitlines() == [
        f"error: the biLM in {bilm_dir} has no LM head (no {missing}), so it cannot score words: perplexity "
        "needs a `python -m spacy_elmo pretrain` output directory, which keeps its vocabulary and softmax "
        "(pretrain this biLM further with --paths.init_dir to get one)"
    ]


def test_outputs_load_as_bilm_component_and_perplexity(tmp_path, text_files):
    import spacy

    train, dev = text_files
    out = tmp_path / "out"
    summary = run(out, train, dev, **{"training.max_steps": 10, "training.softmax": "adaptive"})
    for name in (
        "options.json",
        "weights.hdf5",
        "vocab.txt",
        "softmax.hdf5",
        "config.cfg",
        "metrics.jsonl",
        "training_curve.png",
    ):
        assert (out / name).is_file(), name
    assert (out / "training_curve.png").read_bytes()[:4] == b"\x89PNG"
    records = read_jsonl(out / "metrics.jsonl")
    assert {"step", "loss", "tokens_per_sec"} <= set(records[0])
    assert any("dev_perplexity" in r for r in records)
    # The exported files are the trained model.
    state = load_checkpoint(out / "checkpoint.pt")["model"]
    bilm = ElmoBiLM.from_dir(out)
    for name, tensor in bilm.state_dict().items():
        assert torch.equal(tensor, state[f"bilm.{name}"]), name
    with h5py.File(out / "weights.hdf5", "r") as f:
        assert "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0" in f
    # ... usable by the elmo component ...
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"bilm_dir": str(out)})
    doc = nlp("the cat sat")
    expected = bilm.embed_batch([["the", "cat", "sat"]])[0]
    assert numpy.allclose(doc._.elmo_layers, expected, atol=1e-4)
    # ... and the perplexity command agrees with the last dev evaluation.
    result = perplexity(out, dev)
    assert result["mean"] == pytest.approx(summary["dev_perplexity"]["mean"], rel=1e-5)
    cli = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "perplexity", str(out), str(dev), "--output", str(tmp_path / "ppl.json")],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stderr
    assert "forward perplexity" in cli.stdout and "mean perplexity" in cli.stdout
    assert json.loads((tmp_path / "ppl.json").read_text())["backward"] == pytest.approx(result["backward"], rel=1e-5)


def test_fine_tune_starts_from_published_weights(tmp_path, text_files):
    train, dev = text_files
    out = tmp_path / "tuned"
    run(
        out,
        train,
        dev,
        **{
            "paths.init_options": str(REFERENCE / "options.json"),
            "paths.init_weights": str(REFERENCE / "lm_weights.hdf5"),
            "training.max_steps": 3,
            "training.learn_rate": 1e-9,
            "training.optimizer": "sgd",
        },
    )
    reference = ElmoBiLM.from_files(REFERENCE / "options.json", REFERENCE / "lm_weights.hdf5")
    tuned = ElmoBiLM.from_dir(out)
    assert tuned.options.differences(reference.options) == []
    for name, tensor in reference.state_dict().items():
        assert torch.allclose(tensor, tuned.state_dict()[name], atol=1e-6), name
    # A fresh softmax over the new text's words (the published files have none).
    assert Vocabulary.from_file(out / "vocab.txt").words[3:6] == [".", "the", "a"]
    with h5py.File(out / "softmax.hdf5", "r") as f:
        assert f["weight"].shape == (len(Vocabulary.from_file(out / "vocab.txt")), 16)
    # With a real learning rate the weights move.
    run(
        tmp_path / "moved",
        train,
        dev,
        **{
            "paths.init_options": str(REFERENCE / "options.json"),
            "paths.init_weights": str(REFERENCE / "lm_weights.hdf5"),
            "training.max_steps": 3,
        },
    )
    moved = ElmoBiLM.from_dir(tmp_path / "moved").state_dict()
    assert not torch.allclose(
        reference.state_dict()["bilstm.forward_layers.0.state_weight"], moved["bilstm.forward_layers.0.state_weight"]
    )


# -- bad input -----------------------------------------------------------------
def test_bad_inputs_are_clear_errors(tmp_path, text_files):
    train, _ = text_files
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf8")
    with pytest.raises(PretrainDataError, match="empty.txt: no sentences"):
        run(tmp_path / "a", empty)
    with pytest.raises(PretrainDataError, match="not found: .*missing.txt"):
        run(tmp_path / "b", tmp_path / "missing.txt")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("fine line\nZ\u00fcrich\n".encode("latin-1"))
    with pytest.raises(PretrainDataError, match=r"latin1.txt, line 2: not valid UTF-8 \(byte 0xfc"):
        run(tmp_path / "c", latin1)
    with pytest.raises(PretrainConfigError, match="unknown setting in override --training.max_stepz"):
        load_config(TINY, {"training.max_stepz": 3, "paths.train": str(train)})
    with pytest.raises(PretrainConfigError, match="training.softmax must be one of"):
        load_config(TINY, {"training.softmax": "hierarchical", "paths.train": str(train)})
    with pytest.raises(PretrainConfigError, match="paths.train is required"):
        load_config(TINY)
    with pytest.raises(PretrainConfigError, match="must be given together"):
        load_config(TINY, {"paths.train": str(train), "paths.init_options": "options.json"})


def test_cli_overrides_and_error_exit(tmp_path, text_files):
    train, _ = text_files
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "spacy_elmo",
        "pretrain",
        str(TINY),
        str(out),
        "--paths.train",
        str(train),
        "--training.max_steps",
        "3",
        "--no-progress",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert load_checkpoint(out / "checkpoint.pt")["step"] == 3
    bad = subprocess.run(
        cmd[:5] + [str(tmp_path / "other"), cmd[6], str(tmp_path / "nope.txt")] + cmd[8:],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1
    assert "error: input text not found" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow  # two torch processes and a rendezvous (~25 s): make test-slow
def test_ddp_with_two_cpu_processes(tmp_path, text_files):
    train, dev = text_files
    out = tmp_path / "ddp"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "spacy_elmo",
        "pretrain",
        str(TINY),
        str(out),
        "--paths.train",
        str(train),
        "--paths.dev",
        str(dev),
        "--training.max_steps",
        "12",
        "--training.dropout",
        "0.1",
        "--no-progress",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    state = load_checkpoint(out / "checkpoint.pt")
    assert state["world_size"] == 2 and len(state["rng"]) == 2
    assert not torch.equal(state["rng"][0]["cpu"], state["rng"][1]["cpu"])  # each process its own dropout
    curve = losses(out)
    assert len(curve) == 3 and curve[-1] < curve[0]
    # Each logged step counts the tokens of both processes.
    assert ElmoBiLM.from_dir(out).options.projection_dim == 16
    with pytest.raises(PretrainConfigError, match="written by 2 process"):
        run(out, train, dev, **{"training.max_steps": 14, "training.dropout": 0.1})


def test_a_checkpoint_written_before_train_only_existed_resumes():
    """A setting added later (training.train_only) counts as its default in an older checkpoint's config."""
    from confection import Config

    from spacy_elmo.pretrain.config import config_differences

    current = load_config(None, {"paths.train": "t.txt"})
    saved = Config(current.copy())
    saved["training"] = {k: v for k, v in saved["training"].items() if k != "train_only"}
    assert config_differences(saved, current) == []
    current["training"]["train_only"] = "head"
    assert config_differences(saved, current) == [("training.train_only", "all", "head")]


def test_the_pretraining_curve_has_one_legend_for_both_lines_and_every_point_inside():
    """The demo's pretrain_curve.png had no legend (train loss vs dev perplexity) and its first
    point off the axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spacy_elmo.pretrain.outputs import curve_figure

    records = [{"step": s, "loss": 9.0 - s / 100} for s in range(10, 410, 10)]
    records += [{"step": s, "dev_perplexity": 3000.0 / (s / 50)} for s in range(50, 450, 50)]
    figure = curve_figure(records)
    loss_axis, perplexity_axis = figure.axes
    assert [text.get_text() for text in loss_axis.get_legend().get_texts()] == ["train loss", "dev perplexity"]
    assert loss_axis.get_xlim()[0] == 0 and loss_axis.get_xlim()[1] > 400
    low, high = perplexity_axis.get_ylim()
    assert low < 375.0 and high > 3000.0  # the first (highest) and the last point inside, with room
    figure.canvas.draw()
    labels = [label.get_text() for label in perplexity_axis.get_yticklabels() if label.get_text()]
    assert labels and all(label.isdigit() for label in labels)  # plain numbers, not 10^3
    narrow = [{"step": s, "loss": 6.0} for s in (10, 20)] + [
        {"step": s, "dev_perplexity": p} for s, p in ((50, 563.5), (100, 510.1), (400, 337.6))
    ]  # the demo's: a log axis labelled one tick
    perplexity_axis = curve_figure(narrow).axes[1]
    low, high = perplexity_axis.get_ylim()
    assert perplexity_axis.get_yscale() == "linear" and low < 337.6 and high > 563.5
    plt.close("all")


def test_progress_written_to_a_file_is_a_line_per_logged_step(tmp_path, text_files, capsys):
    """Written to a log file, the progress bar was ~400 carriage-return updates on one line."""
    train, _ = text_files
    settings = {"paths.train": str(train), "paths.dev": None, "training.max_steps": 10}
    pretrain(load_config(TINY, settings), tmp_path / "out", progress=True)  # capsys: stderr is no terminal
    err = capsys.readouterr().err
    assert "\r" not in err
    steps = [line.split(",")[0] for line in err.splitlines() if line.startswith("pretrain: step")]
    assert steps == ["pretrain: step 5/10", "pretrain: step 10/10"]  # log_every_steps = 5
