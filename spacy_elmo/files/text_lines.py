"""Reading a text file's lines as UTF-8, with an error naming the first line and byte that is not."""

from pathlib import Path
from typing import Iterator, Type


def iter_utf8_lines(path: Path, error: Type[Exception]) -> Iterator[str]:
    """Lines of a UTF-8 file without their line ends; raises ``error`` naming
    the first undecodable line and byte."""
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield raw.decode("utf8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise error(
                    f"{path}, line {number}: not valid UTF-8 (byte {raw[err.start]:#04x} at byte offset {err.start})"
                ) from err
