"""``pretrain`` and ``perplexity``: train a biLM on your text, then measure it."""

import json
from pathlib import Path
from typing import Optional

import typer

from ..errors import ElmoError
from ..files.atomic import write_text_atomic
from . import app


@app.command(
    "pretrain",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def pretrain_command(
    ctx: typer.Context,
    config_path: Optional[Path] = typer.Argument(..., help="Pretraining config (.cfg); '-' for the defaults"),
    output_dir: Path = typer.Argument(..., help="Where checkpoints, metrics and the biLM files go"),
    device: str = typer.Option(
        "cpu",
        "--device",
        help="torch device: cpu, cuda or cuda:N (under torchrun, cuda is each process's cuda:LOCAL_RANK)",
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar"),
):
    """Pretrain (or fine-tune) an ELMo biLM; settings can be overridden like
    `spacy train`: --training.max_steps 60 --paths.train corpus.txt.
    Re-running the same command on the same OUTPUT_DIR resumes from its last
    checkpoint (give a larger --training.max_steps to train longer)."""
    from spacy.cli._util import parse_config_overrides

    from ..pretrain import load_config, pretrain

    try:
        overrides = parse_config_overrides(ctx.args)
        config = load_config(None if str(config_path) == "-" else config_path, overrides)
        summary = pretrain(config, output_dir, device=device, progress=progress)
    except ElmoError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    except KeyboardInterrupt:  # pretrain has said where its last checkpoint is
        raise typer.Exit(code=130)
    if summary["rank"] == 0:
        dev = summary["dev_perplexity"]
        if dev and "mean_loss" in dev:
            dev_text = f", dev loss {dev['mean_loss']:.4f} (continuous outputs: no perplexity)"
        else:
            dev_text = (
                f", dev perplexity {dev['mean']:.2f} (forward {dev['forward']:.2f}, backward {dev['backward']:.2f})"
                if dev
                else ""
            )
        dev_text += f" on {summary['dev_scored']}" if dev else ""
        typer.echo(f"trained to step {summary['steps']}{dev_text}; biLM in {output_dir}", err=True)


@app.command("perplexity")
def perplexity_command(
    bilm_dir: Path = typer.Argument(
        ..., help="A `pretrain` output directory (options.json, weights.hdf5, vocab.txt, softmax.hdf5)"
    ),
    text: Path = typer.Argument(
        ..., help="Text to score: a file (one tokenised sentence per line, or .spacy) or a directory"
    ),
    text_format: str = typer.Option(
        "auto", "--text-format", help="auto, lines or paragraphs (as the config's corpus.text_format)"
    ),
    output: Optional[Path] = typer.Option(None, "--output", help="Also write the figures to this JSON file"),
    device: str = typer.Option("cpu", "--device", help="torch device"),
):
    """Forward, backward and mean perplexity of TEXT under the biLM's full softmax."""
    from ..pretrain.evaluation import unknown_rate_warning
    from ..pretrain.perplexity import perplexity

    try:
        result = perplexity(bilm_dir, text, text_format=text_format, device=device)
    except ElmoError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    scored = (
        f"all {result['sentences']:,} sentences of {text}, {result['predictions_per_direction']:,} "
        "predictions per direction"
    )
    if "mean_loss" in result:
        typer.echo(
            "no perplexity: this biLM was trained with continuous outputs (vmf), which give no word "
            "probabilities; its held-out vMF loss per prediction instead:"
        )
        typer.echo(f"forward loss  {result['forward_loss']:.4f}")
        typer.echo(f"backward loss {result['backward_loss']:.4f}")
        typer.echo(f"mean loss     {result['mean_loss']:.4f}  ({scored})")
    else:
        typer.echo(f"forward perplexity  {result['forward']:.3f}")
        typer.echo(f"backward perplexity {result['backward']:.3f}")
        typer.echo(f"mean perplexity     {result['mean']:.3f}  (exp of the mean loss; {scored})")
    typer.echo(f"unknown words       {result['unknown_rate']:.2%}  (outside the vocabulary, scored as <UNK>)")
    warning = unknown_rate_warning(result["unknown_rate"], str(text))
    if warning and "mean_loss" not in result:
        typer.echo(f"warning: {warning}", err=True)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(output, json.dumps(result, indent=2) + "\n")
