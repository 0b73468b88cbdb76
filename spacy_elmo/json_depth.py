"""How deep lists and objects may nest in JSON-like data (a file's, a config's, a saved
biLM's): deeper data would break the parser or a deep copy. A check on data, not on a file,
so the network's schema (``bilm/options.py``) and the JSON readers share it."""

from typing import Any

# Deeper JSON is a damaged or hostile file (our files nest 3 levels): deeper than
# the interpreter's recursion limit, decoding or copying it raises RecursionError.
MAX_JSON_DEPTH = 100


def check_json_depth(data: Any) -> None:
    """A ``ValueError`` if lists and objects in ``data`` nest deeper than MAX_JSON_DEPTH
    (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list, tuple)):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
