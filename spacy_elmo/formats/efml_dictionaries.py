"""ELMoForManyLangs' dictionary files (``char.dic``, ``word.dic``): ``token<TAB>id`` lines
read as EFML 0.0.4.post2 reads them. A line is ``line.strip().split("\\t")``; one field
means the token was whitespace (strip ate it) and stands for the full-width space U+3000."""

from pathlib import Path
from typing import Dict, Optional, Tuple

from ..errors import ElmoWeightsError
from ..files.paths import require_file
from ..files.text_lines import iter_utf8_lines
from .efml_names import EFML_DIR_HINT

FULL_WIDTH_SPACE = "\u3000"


def read_dictionary(path: Path) -> Dict[str, int]:
    """``token<TAB>id`` lines as EFML reads them; a later line for the same token wins
    (as in EFML's dict); two tokens with one id are refused."""
    require_file(path, "ELMoForManyLangs dictionary", hint=f" ({EFML_DIR_HINT})")
    lexicon: Dict[str, int] = {}
    owner: Dict[int, Tuple[str, int]] = {}
    for number, line in enumerate(iter_utf8_lines(path, ElmoWeightsError), start=1):
        fields = line.strip().split("\t")
        if fields == [""]:
            continue  # a blank line (EFML itself would fail on it)
        if len(fields) == 1:
            fields.insert(0, FULL_WIDTH_SPACE)
        index = _dictionary_id(fields[1]) if len(fields) == 2 else None
        if index is None:
            raise ElmoWeightsError(
                f"{path}, line {number}: expected 'token<TAB>id' with an integer id, got {_shown(line)}"
            )
        token = fields[0]
        if index in owner and owner[index][0] != token:
            first, first_line = owner[index]
            raise ElmoWeightsError(
                f"{path}, line {number}: id {index} is given to {token!r} and, on line {first_line}, to {first!r}: "
                "a damaged dictionary (each id must name one token)"
            )
        owner[index] = (token, number)
        lexicon[token] = index
    return lexicon


def _dictionary_id(text: str) -> Optional[int]:
    """An id as EFML's ``int()`` reads it, or None: ``isdecimal`` (not ``isdigit``, which
    "²" passes) and no more digits than ``int()`` converts."""
    if not text.isdecimal():
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _shown(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut so that a damaged file's line keeps the message to one short line."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"
