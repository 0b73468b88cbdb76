"""Every error spacy-elmo raises for bad files, options and inputs.

Each subclasses ``ValueError`` (through ``ElmoError``; the not-found one also
``FileNotFoundError``, the wrong-input one also ``TypeError``), so callers that already catch those keep working;
every message names the file and the option or dataset at fault.
"""

import errno


class ElmoError(ValueError):
    """Base class of spacy-elmo's input errors."""


class ElmoOptionsError(ElmoError):
    """An options.json that cannot be read or describes an invalid model."""


class ElmoWeightsError(ElmoError):
    """A weights.hdf5 that cannot be read or does not fit its options."""


class ElmoCheckpointError(ElmoError):
    """A TensorFlow checkpoint that cannot be read (a damaged index or data shard) or does not fit its options."""


class ElmoFileNotFoundError(ElmoError, FileNotFoundError):
    """A file the user named does not exist."""


class ElmoPermissionError(ElmoError, PermissionError):
    """A file the user named that this user may not read."""


class ElmoInputError(ElmoError, TypeError):
    """Sentences given to the biLM that are not lists of token strings."""


class ElmoNoWeightsError(ElmoError):
    """The biLM has no weights yet."""


class ElmoDiskFullError(OSError, ElmoError):
    """No space left for a write to ``filename``: found before it (``detail`` says how much is free
    and needed) or by a write that filled the disk. An ``OSError`` with errno ENOSPC, as the file
    system's own, so callers that handle that keep working."""

    def __init__(self, path: object, detail: str = "") -> None:
        super().__init__(errno.ENOSPC, "No space left on device", str(path))
        self.detail = detail

    def __str__(self) -> str:
        return f"no space left on device for {self.filename}" + (f" ({self.detail})" if self.detail else "")


class ElmoLockedError(ElmoError):
    """An output that another run is writing (it holds the output's lock file)."""


class EmbedInputError(ElmoError):
    """The input text of ``embed`` cannot be read as asked."""


class EmbedOutputLostError(ElmoError):
    """The partial output of ``embed``, removed by someone else while the run wrote it."""


class PretrainConfigError(ElmoError):
    """A pretraining config that cannot be used."""


class PretrainDataError(ElmoError):
    """Pretraining text, vocabulary or output files that cannot be read or hold nothing to train on."""


class ElmoSavedPipelineError(ElmoError):
    """A saved pipeline's component settings that were damaged: no longer raised, as the elmo
    component saves no setting (kept so that code catching it still imports it)."""


class PretrainDivergedError(ElmoError):
    """Pretraining whose loss or weights stopped being finite: stopped, the last good checkpoint kept."""


# What h5py raises reading a damaged file: OSError, and for damaged metadata also
# RuntimeError ("Object visitation failed"), KeyError ("Unable to synchronously open
# object"), ValueError, TypeError. Caught only around reads of a file (and after our
# own errors, which are ValueErrors).
HDF5_READ_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError)


def one_line_reason(err: BaseException) -> str:
    """The first line of an exception's message (its type where it has none)."""
    text = str(err).strip().strip("'\"").strip()
    return text.splitlines()[0] if text else type(err).__name__
