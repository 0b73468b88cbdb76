"""Writes the TensorFlow checkpoints under tests/data/tf_checkpoints/, with TensorFlow itself.

Run once, outside the project's venv (TensorFlow is never a dependency of spacy-elmo):

    python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu tf-keras
    TF_USE_LEGACY_KERAS=1 /tmp/tfvenv/bin/python tests/data/tf_checkpoints/make_checkpoints.py

Made with tensorflow-cpu 2.21.0 and tf-keras 2.21.0 (Keras 2: TF1's LSTMCell, so the
LSTM variables get the names TF1's own cells give them). Each model directory holds
what a bilm-tf training run leaves: options.json (training's, n_characters 261) and
a V2 checkpoint ``model.ckpt-N`` saved by the name-based ``tf.compat.v1.train.Saver``
(bilm-tf's saver), holding the trainable variables under ``lm/`` with bilm-tf's names and
shapes, the softmax, the Adagrad slots, ``global_step`` and ``train_perplexity``.
The graph only creates the variables (and runs the real LSTM cells so they create theirs);
every value is random. ``expected.npz`` holds what bilm-tf's ``dump_weights`` writes to
weights.hdf5: the trainable variables without the softmax, under its dataset names.
"""

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
HERE = Path(__file__).resolve().parent

FIELDS = ("filters", "char_dim", "n_highway", "lstm_dim", "proj", "n_layers", "skip", "activation", "vocab", "step")
MODELS = {  # name: (FIELDS..., number of data shards)
    # two LSTM layers with a skip connection, two highway layers, tanh
    "two_layers": ([[1, 4], [2, 6], [3, 8]], 4, 2, 16, 8, 2, True, "tanh", 11, 7, 1),
    # one highway layer, wider filters, no skip connections, relu
    "no_skip": ([[1, 3], [3, 5], [5, 7], [6, 9]], 5, 1, 12, 6, 2, False, "relu", 9, 120, 1),
    # no highway layer, three LSTM layers, saved in several data shards (one per device)
    "sharded": ([[2, 5], [4, 11]], 3, 0, 10, 7, 3, True, "relu", 13, 3, 2),
    # one LSTM layer: its variables are not under multi_rnn_cell/cell_0
    "one_layer": ([[1, 2], [2, 3]], 2, 1, 6, 4, 1, False, "tanh", 5, 1, 1),
}


def options_json(m):
    return {
        "bidirectional": True,
        "char_cnn": {
            "activation": m["activation"],
            "embedding": {"dim": m["char_dim"]},
            "filters": m["filters"],
            "max_characters_per_token": 50,
            "n_characters": 261,
            "n_highway": m["n_highway"],
        },
        "dropout": 0.1,
        "lstm": {
            "cell_clip": 3,
            "dim": m["lstm_dim"],
            "n_layers": m["n_layers"],
            "proj_clip": 3,
            "projection_dim": m["proj"],
            "use_skip_connections": m["skip"],
        },
        "all_clip_norm_val": 10.0,
        "n_epochs": 10,
        "n_train_tokens": 1000,
        "batch_size": 2,
        "n_tokens_vocab": m["vocab"],
        "unroll_steps": 3,
        "n_negative_samples_batch": 4,
    }


def build_variables(m, device_of):
    """bilm-tf's LanguageModel variables, created as its graph creates them."""
    F = sum(n for _, n in m["filters"])
    P, C = m["proj"], m["lstm_dim"]
    with v1.variable_scope("lm"):
        with tf.device(device_of(0)):
            v1.get_variable("char_embed", [261, m["char_dim"]])
        with v1.variable_scope("CNN"):
            for i, (width, num) in enumerate(m["filters"]):
                v1.get_variable(f"W_cnn_{i}", [1, width, m["char_dim"], num])
                v1.get_variable(f"b_cnn_{i}", [num])
        with v1.variable_scope("CNN_proj"):
            v1.get_variable("W_proj", [F, P])
            v1.get_variable("b_proj", [P])
        for i in range(m["n_highway"]):
            with v1.variable_scope(f"CNN_high_{i}"):
                for part in ("carry", "transform"):
                    v1.get_variable(f"W_{part}", [F, F])
                    v1.get_variable(f"b_{part}", [F])
        for direction in range(2):
            with tf.device(device_of(direction)), v1.variable_scope(f"RNN_{direction}"):
                cells = []
                for i in range(m["n_layers"]):
                    cell = v1.nn.rnn_cell.LSTMCell(C, num_proj=P, cell_clip=3.0, proj_clip=3.0)
                    cells.append(v1.nn.rnn_cell.ResidualWrapper(cell) if m["skip"] and i > 0 else cell)
                # one layer: bilm-tf uses the cell itself, no MultiRNNCell (other variable names)
                cell = v1.nn.rnn_cell.MultiRNNCell(cells) if len(cells) > 1 else cells[0]
                inputs = [v1.placeholder(tf.float32, (2, P)) for _ in range(3)]
                v1.nn.static_rnn(cell, inputs, initial_state=cell.zero_state(2, tf.float32))
        with tf.device(device_of(1)), v1.variable_scope("softmax"):
            v1.get_variable("W", [m["vocab"], P])
            v1.get_variable("b", [m["vocab"]])


def dump_weights_name(tf_name):
    """The dataset name bilm-tf's dump_weights gives a variable, from its ``v.name``."""
    name = re.sub(":0$", "", tf_name).lstrip("lm/")  # sic: dump_weights strips characters, not a prefix
    rules = [
        ("/rnn/", "/RNN/"),
        ("/multi_rnn_cell/", "/MultiRNNCell/"),
        ("/cell_", "/Cell"),
        ("/lstm_cell/", "/LSTMCell/"),
    ]
    for pattern, new in rules:
        name = re.sub(pattern, new, name)
    if "/RNN/" in name:
        rules = [("projection/kernel", "W_P_0")] if "projection" in name else [("/kernel", "/W_0"), ("/bias", "/B")]
        for pattern, new in rules:
            name = re.sub(pattern, new, name)
    return name


def make(name, m, seed):
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "options.json").write_text(json.dumps(options_json(m), indent=1) + "\n")
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(seed)
        global_step = v1.get_variable("global_step", [], initializer=v1.constant_initializer(0), trainable=False)
        v1.get_variable("train_perplexity", [], initializer=v1.constant_initializer(0.0), trainable=False)
        build_variables(m, lambda k: f"/cpu:{k % m['shards']}")
        trainable = v1.trainable_variables()
        # Adagrad's slots (lm/.../Adagrad), as bilm-tf's training creates them
        loss = tf.add_n([tf.reduce_sum(tf.square(v)) for v in trainable])
        train = v1.train.AdagradOptimizer(0.2, initial_accumulator_value=1.0).minimize(loss, global_step=global_step)
        rng = np.random.default_rng(seed)
        assigns = [
            v.assign(rng.standard_normal(v.shape.as_list()).astype(np.float32))
            for v in v1.global_variables()
            if v.dtype.base_dtype == tf.float32
        ]
        config = v1.ConfigProto(device_count={"CPU": m["shards"]})
        with v1.Session(graph=graph, config=config) as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(train)  # slots and step become those of a run, then every float is random
            sess.run(assigns)
            sess.run(global_step.assign(m["step"]))
            saver = v1.train.Saver(v1.global_variables(), sharded=m["shards"] > 1)
            os.chdir(out)  # the `checkpoint` file then names the prefix relative to its directory
            saver.save(sess, "model.ckpt", global_step=m["step"], write_meta_graph=False)
            os.chdir(HERE)
            expected = {dump_weights_name(v.name): sess.run(v) for v in trainable if "softmax" not in v.name}
            everything = {v.name: sess.run(v) for v in v1.global_variables()}
    np.savez(out / "expected.npz", **expected)
    np.savez(out / "all_variables.npz", **everything)
    print(name, sorted(p.name for p in out.iterdir()), len(expected), "datasets")


if __name__ == "__main__":
    assert os.environ.get("TF_USE_LEGACY_KERAS") == "1", "set TF_USE_LEGACY_KERAS=1 (TF1's LSTMCell)"
    print("tensorflow", tf.__version__)
    for seed, (name, (*row, shards)) in enumerate(MODELS.items(), start=63):
        make(name, dict(zip(FIELDS, row), shards=shards), seed)
