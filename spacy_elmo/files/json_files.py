"""JSON and JSONL files. Kept on the standard ``json`` rather than srsly for what srsly does not
do: a depth limit and one-line errors on hostile input (``parse_json``), atomic rewrites, a
JSONL reader that drops the line a kill cut short, and one serializer for every record we
write, so that a record appended and the same record rewritten are the same bytes."""

import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Type

from ..json_depth import MAX_JSON_DEPTH, check_json_depth
from .atomic import write_text_atomic
from .paths import require_readable


def parse_json(text: str) -> Any:
    """``json.loads`` whose every failure is a ``ValueError`` with a one-line reason: bad
    syntax (``json.JSONDecodeError``), an integer too long for Python to convert, or
    nesting deeper than MAX_JSON_DEPTH."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError as err:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels") from err
    except ValueError as err:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()  # Python 3.9.14+
        raise ValueError(f"an integer of more than {limit} digits") from err
    check_json_depth(data)
    return data


def read_json(path: Path, error: Type[Exception]) -> Any:
    """A JSON file's content; a file that is not UTF-8 JSON raises ``error`` naming it."""
    require_readable(path, "the file")
    try:
        return parse_json(path.read_text(encoding="utf8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise error(f"{path}: not a valid JSON file ({err}): a damaged or cut file? write it again") from err


def read_jsonl(path: Path) -> List[Dict[str, Any]]:
    """The records of a JSONL file (none if it is missing), up to the first line a
    kill cut short: that line and everything after it are dropped, not an error."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf8").splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def write_jsonl_atomic(path: Path, records: Iterable[Dict[str, Any]]) -> None:
    """Rewrite a JSONL file whole (a kill leaves the old file or the new one)."""
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in records))


def append_jsonl(path: Path, records: Iterable[Dict[str, Any]]) -> None:
    with path.open("a", encoding="utf8") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
        f.flush()


def write_json_atomic(path: Path, data: Any, indent: Optional[int] = None) -> None:
    write_text_atomic(path, json.dumps(data, indent=indent))
