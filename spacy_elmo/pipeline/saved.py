"""A saved elmo component's files (``NAME/cfg``, ``NAME/model``), checked before spaCy
reads them: a damaged or missing file gets an error naming that file and what to do,
not spaCy's bare ``FileNotFoundError`` or a JSON error blamed on another file."""

from pathlib import Path
from typing import Iterable

import srsly

from ..errors import ElmoFileNotFoundError, ElmoSavedPipelineError


def check_saved_component(path: Path, name: str, exclude: Iterable[str]) -> None:
    exclude = set(exclude)
    if "cfg" not in exclude:
        _check_cfg(path / "cfg", name)
    model = path / "model"
    if "model" not in exclude and not model.is_file():
        raise ElmoFileNotFoundError(
            f"component '{name}': the saved pipeline lacks {model} (its biLM weights): "
            "restore that file from the saved pipeline, or save the pipeline again"
        )


def _check_cfg(cfg: Path, name: str) -> None:
    """spaCy reads ``cfg`` only if it is there; its settings are all runtime choices that
    the pipeline's config.cfg gives again, so deleting a damaged one loses nothing."""
    if not cfg.exists():
        return
    what_to_do = "delete it (its settings come from the pipeline's config.cfg) or restore it"
    try:
        data = srsly.read_json(cfg)
    except ValueError as err:
        problem = "is empty" if cfg.stat().st_size == 0 else f"is not valid JSON ({err})"
        raise ElmoSavedPipelineError(f"component '{name}': {cfg} {problem}: {what_to_do}") from err
    if not isinstance(data, dict):
        raise ElmoSavedPipelineError(
            f"component '{name}': {cfg} holds a JSON {type(data).__name__}, not an object of settings: {what_to_do}"
        )
