"""No per-batch copy to the host in the prediction path (on a GPU each is a sync and a transfer).

A source check: every call of ``.cpu()``, ``.numpy()``, ``.tolist()``, ``.item()``, ``float()``
or thinc's ``to_numpy()`` inside the modules a prediction batch runs through must be in a function
of the allow-list below, each with its reason.
"""

import ast
from pathlib import Path
from typing import Dict, Set, Tuple

PACKAGE = Path(__file__).resolve().parent.parent / "spacy_elmo"
HOT_MODULES = (
    "bilm/elmo_bilm.py",
    "bilm/id_batches.py",
    "bilm/carried_state.py",
    "bilm/lstm.py",
    "bilm/char_encoder.py",
    "bilm/char_ids.py",
    "bilm/type_cache.py",
    "bilm/windows.py",
    "layers/bilm_layer.py",
    "layers/bilm_shim.py",
    "layers/bilm_output_cache.py",
    "bounded_lru.py",
    "doc_data.py",
    "layers/listener.py",
    "layers/scalar_mix.py",
    "layers/bilm_segments.py",
    "pipeline/elmo.py",
)
HOST_METHODS = {"cpu", "numpy", "tolist", "item"}
HOST_FUNCTIONS = {"float", "to_numpy", "host_array"}
# (module, function): why a host copy is right there.
ALLOWED: Dict[Tuple[str, str], str] = {
    ("bilm/carried_state.py", "export"): "checkpoints, not prediction",
    ("bilm/elmo_bilm.py", "_embed"): "embed_batch's public contract: numpy arrays out",
    ("bilm/lstm.py", "__init__"): "clip settings (Python floats), at construction",
    ("bilm/lstm.py", "tf_arrays"): "writing weight files",
    ("bilm/lstm.py", "_rows_ending_at"): "stateful runs only (final states per row); lengths are host-sized",
    ("bilm/char_encoder.py", "tf_arrays"): "writing weight files",
    (
        "bilm/char_encoder.py",
        "_convolve_by_length",
    ): "every chunk's width in one copy per call (slicing needs host sizes)",
    ("bilm/type_cache.py", "_row_keys"): "keys from the host ids (a no-op copy for them)",
    ("doc_data.py", "stored_form"): "what the Doc stores lives on the host (the mix reduced on the device first)",
    ("doc_data.py", "token_mix_weights"): "Python config floats",
    ("layers/listener.py", "learned_mix"): "a report of the learned weights, not prediction",
    ("layers/listener.py", "accumulate"): "the loss figure spaCy logs, once per training batch",
}


class _HostCopies(ast.NodeVisitor):
    """(innermost function, line) of every host-copy call."""

    def __init__(self) -> None:
        self.functions: list = []
        self.found: Set[Tuple[str, int]] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        method = isinstance(func, ast.Attribute) and func.attr in HOST_METHODS
        function = isinstance(func, ast.Name) and func.id in HOST_FUNCTIONS
        if (method or function) and self.functions:
            self.found.add((self.functions[-1], node.lineno))
        self.generic_visit(node)


def host_copies(path: Path) -> Set[Tuple[str, int]]:
    visitor = _HostCopies()
    visitor.visit(ast.parse(path.read_text(encoding="utf8")))
    return visitor.found


def test_the_prediction_path_copies_nothing_to_the_host_per_batch():
    offending = [
        f"{module}:{line} in {function}()"
        for module in HOT_MODULES
        for function, line in sorted(host_copies(PACKAGE / module))
        if (module, function) not in ALLOWED
    ]
    assert not offending, "host copies in the prediction path:\n" + "\n".join(offending)
    unused = [key for key in ALLOWED if key[1] not in {f for f, _ in host_copies(PACKAGE / key[0])}]
    assert not unused, f"allowed but no longer there (drop them): {unused}"


def test_the_check_finds_a_host_copy(tmp_path):
    source = tmp_path / "example.py"
    source.write_text(
        "def predict(x):\n    def inner(y):\n        return y.tolist()\n    return x.cpu().numpy()\n\ndef fine(x):\n    return x + 1\n"
    )
    assert host_copies(source) == {("predict", 4), ("inner", 3)}
