"""The package's import graph, read from the source (every import, those inside functions
too): no module reaches itself through imports, no two packages depend on each other, and
the network (``spacy_elmo/bilm/``) imports no file format library, no file helper and
nothing of ``spacy_elmo/formats/``: files are the formats', which build on the network."""

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


def package_graph(graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    """``graph`` by unit: each subpackage of the package (``spacy_elmo.bilm``, ...) and each
    of its top modules is one, the package's ``__init__`` another (``spacy_elmo``)."""

    def unit(name: str) -> str:
        return ".".join(name.split(".")[:2])

    units: Dict[str, Set[str]] = {}
    for name, targets in graph.items():
        units.setdefault(unit(name), set()).update(unit(t) for t in targets if unit(t) != unit(name))
    return units


def test_no_two_packages_depend_on_each_other():
    """Counted by package (imports inside functions too), the imports run one way: the
    network (bilm/) below the formats, which build on it, and so on up."""
    assert import_cycles(package_graph(import_graph())) == []


def test_the_network_imports_nothing_of_the_formats():
    """``ElmoBiLM.from_files`` and friends reach the formats through the package's wiring
    (``spacy_elmo/bilm_files.py``), never by an import."""
    modules = module_names()
    importers = {
        name
        for name, path in modules.items()
        if name.startswith("spacy_elmo.bilm.") or name == "spacy_elmo.bilm"
        if any(t == "spacy_elmo.formats" or t.startswith("spacy_elmo.formats.") for t in imported_names(name, path))
    }
    assert importers == set()
    assert "spacy_elmo.formats" not in package_graph(import_graph())["spacy_elmo.bilm"]
    assert "spacy_elmo.bilm" in package_graph(import_graph())["spacy_elmo.formats"]  # the formats build on it


def test_the_package_graph_finds_a_loop_between_two_packages():
    graph = {"p.a.x": {"p.b.y"}, "p.b.y": set(), "p.b.z": {"p.a"}, "p.c": {"p.a.x"}}
    assert package_graph(graph) == {"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": {"p.a"}}
    assert import_cycles(package_graph(graph)) == [["p.a", "p.b"]]
