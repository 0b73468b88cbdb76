"""options.json and weights.hdf5 built to break the readers (issue 61): each is a one-line
error naming the file, never a traceback or another file's bytes."""

import json

import pytest

from spacy_elmo.bilm import ElmoOptions
from spacy_elmo.errors import ElmoOptionsError

from .conftest import tiny_options


def options_text(**replace) -> str:
    """A valid options.json whose values ``replace`` swaps for raw JSON text."""
    data = tiny_options().to_dict()
    marks = {}
    for number, (section, name) in enumerate(key.split(".") for key in replace):
        data[section][name] = f"@{number}@"
        marks[f'"@{number}@"'] = list(replace.values())[number]
    text = json.dumps(data)
    for mark, raw in marks.items():
        text = text.replace(mark, raw)
    return text


@pytest.mark.parametrize(
    "raw,reason",
    [
        ("9" * 5000, "an integer of more than 4300 digits"),
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 100 levels"),
        ("[" * 900 + "]" * 900, "nested deeper than 100 levels"),  # parses, but deep copies would fail
    ],
)
def test_an_options_file_built_to_break_the_parser_is_one_line_naming_it(tmp_path, raw, reason):
    path = tmp_path / "options.json"
    path.write_text(options_text(**{"lstm.dim": raw}), encoding="utf8")
    with pytest.raises(ElmoOptionsError) as err:
        ElmoOptions.from_file(path)
    message = str(err.value)
    assert message.startswith(f"{path}: options file is not valid JSON (") and reason in message
    assert "\n" not in message and len(message) < 300


def test_options_nested_too_deeply_are_refused_from_a_dict_too():
    deep: list = []
    for _ in range(900):
        deep = [deep]
    data = {**tiny_options().to_dict(), "extra_setting": deep}
    with pytest.raises(ElmoOptionsError, match=r"^the saved biLM: options nested deeper than 100 levels"):
        ElmoOptions.from_dict(data, source="the saved biLM")
