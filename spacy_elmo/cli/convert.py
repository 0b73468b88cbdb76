"""``convert-checkpoint``: a bilm-tf TensorFlow checkpoint to a biLM directory, without TensorFlow."""

from pathlib import Path

import typer

from ..errors import ElmoError
from . import app


@app.command("convert-checkpoint")
def convert_checkpoint_command(
    # Named in lower case, as embed's and pretrain's are: the help shows the names.
    checkpoint_prefix: Path = typer.Argument(
        ..., help="The checkpoint prefix (DIR/model.ckpt-N, the name before .index), or bilm-tf's save directory"
    ),
    options_file: Path = typer.Argument(..., help="The options.json the model was trained with"),
    output_dir: Path = typer.Argument(
        ..., help="New directory for options.json + weights.hdf5 (or an empty one; must not hold files)"
    ),
):
    """Write the weights.hdf5 bilm-tf's dump_weights would write from a training
    checkpoint (TensorFlow's V2 format, read without TensorFlow; the arrays bit for
    bit, the softmax and optimizer state left out), beside the options: a biLM
    directory for bilm_dir, --bilm-dir or ElmoBiLM.from_dir."""
    from ..bilm.tf_convert import convert_checkpoint

    try:
        arrays = convert_checkpoint(checkpoint_prefix, options_file, output_dir)
    except ElmoError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    weights = sum(array.size for array in arrays.values())
    typer.echo(f"wrote {len(arrays)} datasets ({weights:,} weights) and the options to {output_dir}", err=True)
