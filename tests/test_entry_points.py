"""setup.py's entry points and the code's registrations name the same things, both ways.

spaCy finds an installed package's factories, architectures, loggers and misc functions through
its entry points (``spacy_factories``, ``spacy_architectures``, ...), before anything imports it;
a registration the entry points miss works only once the package is imported, and an entry point
the code no longer registers breaks every config naming it.
"""

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Dict, Tuple

import catalogue
import pytest

import spacy_elmo

SETUP = Path(spacy_elmo.__file__).parent.parent / "setup.py"


def declared_entry_points() -> Dict[Tuple[str, str], str]:
    """(group, name) -> "module:attribute", read from setup.py's source (not from an install)."""
    tree = ast.parse(SETUP.read_text(encoding="utf8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "setup"]
    (entry_points,) = [kw.value for call in calls for kw in call.keywords if kw.arg == "entry_points"]
    found = {}
    for group, lines in ast.literal_eval(entry_points).items():
        for line in lines:
            name, _, target = (part.strip() for part in line.partition("="))
            found[(group, name)] = target
    return found


def resolve(target: str):
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def code_registrations() -> Dict[Tuple[str, str], object]:
    """(entry point group, name) -> function, for everything spacy_elmo's modules register in
    spaCy's and thinc's registries once they are all imported (catalogue's own record, which
    holds what was registered by code, not what entry points offer)."""
    for module in pkgutil.walk_packages(spacy_elmo.__path__, "spacy_elmo."):
        importlib.import_module(module.name)
    return {
        (GROUP_OF_NAMESPACE.get(key[:-1], "_".join(key[:-1])), key[-1]): func
        for key, func in catalogue.REGISTRY.items()
        if getattr(func, "__module__", "").startswith("spacy_elmo")
    }


# spaCy 3.8 keeps `Language.factory`'s functions in a namespace of its own; their entry points
# are still read from spacy_factories.
GROUP_OF_NAMESPACE = {("spacy", "internal_factories"): "spacy_factories"}


def test_setup_reads_the_entry_points():
    declared = declared_entry_points()
    assert declared[("spacy_factories", "elmo")] == "spacy_elmo.pipeline.elmo:make_elmo"
    assert len([key for key in declared if key[0] == "spacy_architectures"]) >= 8


@pytest.mark.parametrize("key", sorted(k for k in declared_entry_points() if k[0] != "console_scripts"))
def test_each_entry_point_is_what_the_code_registers_under_its_name(key):
    registered = code_registrations()
    assert key in registered, f"setup.py declares {key[0]} '{key[1]}', which the code does not register"
    assert registered[key] is resolve(declared_entry_points()[key]), f"{key}: setup.py names another function"


def test_each_registration_has_its_entry_point():
    declared = declared_entry_points()
    missing = sorted(key for key in code_registrations() if key not in declared)
    assert missing == [], f"registered by the code but not declared in setup.py's entry_points: {missing}"


def test_the_console_script_is_the_command_line_python_m_runs():
    from spacy_elmo import __main__ as main_module
    from spacy_elmo.cli import app

    (script,) = [name for group, name in declared_entry_points() if group == "console_scripts"]
    assert script == "spacy-elmo" and app.info.name == script
    assert resolve(declared_entry_points()[("console_scripts", script)]) is main_module.main
    commands = {command.name for command in app.registered_commands}
    assert commands == {"embed", "pretrain", "perplexity", "convert-checkpoint"}
