"""The package's import graph, read from the source (every import, those inside functions
too): no module reaches itself through imports, and the network (``spacy_elmo/bilm/``)
imports no file format library and no file helper: files are ``spacy_elmo/formats/``'s."""

import ast
from pathlib import Path
from typing import Dict, List, Set

import spacy_elmo

PACKAGE = Path(spacy_elmo.__file__).parent
# What reads or writes files: the formats' libraries and the package's file helpers.
FILE_MODULES = ("h5py", "json", "struct", "msgpack", "pickle", "zlib", "srsly", "spacy_elmo.files")


def module_names() -> Dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imported_names(name: str, path: Path) -> Set[str]:
    """Every module ``name`` imports, as written (absolute names, relative ones resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # a submodule, if it is one
    return found


def import_graph() -> Dict[str, Set[str]]:
    """Module -> the package's modules it runs when imported: each one it names, and the
    packages above that one which do not hold the importer (their ``__init__`` runs first)."""
    modules = module_names()
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for target in imported_names(name, path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            while target and target != name:
                if not (name + ".").startswith(target + "."):
                    edges.add(target)
                target = target.rpartition(".")[0]
        graph[name] = edges
    return graph


def import_cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    cycles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_module_of_the_package_imports_itself_through_others():
    assert import_cycles(import_graph()) == []


def test_the_walk_finds_a_cycle_through_an_import_inside_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert "spacy_elmo.bilm" in import_graph()["spacy_elmo"]  # spacy_elmo's __getattr__ imports it


def test_the_network_reads_no_file():
    modules = module_names()
    readers = {}
    for name, path in modules.items():
        if name == "spacy_elmo.bilm" or name.startswith("spacy_elmo.bilm."):
            targets = imported_names(name, path)
            found = [
                banned for banned in FILE_MODULES if any(t == banned or t.startswith(banned + ".") for t in targets)
            ]
            if found:
                readers[name] = found
    assert readers == {}


def test_the_formats_know_no_network_but_the_checkpoint_converter():
    """bilm/ calls the formats, so they import nothing of it (tf_convert alone builds on its
    layout, and nothing in bilm/ imports tf_convert)."""
    modules = module_names()
    network_users = {
        name
        for name, path in modules.items()
        if name.startswith("spacy_elmo.formats")
        and any(t == "spacy_elmo.bilm" or t.startswith("spacy_elmo.bilm.") for t in imported_names(name, path))
    }
    assert network_users == {"spacy_elmo.formats.tf_convert"}
    graph = import_graph()
    assert not any(
        "spacy_elmo.formats.tf_convert" in graph[name] for name in graph if name.startswith("spacy_elmo.bilm")
    )
