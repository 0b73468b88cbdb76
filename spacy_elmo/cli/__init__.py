"""Command line: ``python -m spacy_elmo COMMAND`` (or ``spacy-elmo COMMAND``)."""

import typer

app = typer.Typer(
    name="spacy-elmo",
    help="ELMo biLM tools: embed text, pretrain and evaluate language models, convert bilm-tf checkpoints.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """ELMo biLM tools: embed text, pretrain and evaluate language models, convert bilm-tf checkpoints."""


# Commands register themselves on `app` when imported.
from . import convert, embed, pretrain  # noqa: E402,F401


def main() -> None:
    app()
