"""A saved elmo component's files (``NAME/model``), checked before spaCy reads them: a
missing file gets an error naming that file and what to do, not spaCy's bare
``FileNotFoundError``. The component saves no ``NAME/cfg`` (its settings come from the
pipeline's config.cfg), and one an earlier version saved is never read."""

from pathlib import Path
from typing import Iterable

from ..errors import ElmoFileNotFoundError


def check_saved_component(path: Path, name: str, exclude: Iterable[str]) -> None:
    model = path / "model"
    if "model" not in set(exclude) and not model.is_file():
        raise ElmoFileNotFoundError(
            f"component '{name}': the saved pipeline lacks {model} (its biLM weights): "
            "restore that file from the saved pipeline, or save the pipeline again"
        )
