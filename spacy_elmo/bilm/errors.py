"""Errors raised for bad weight files, options and inputs.

Each subclasses ``ValueError`` (or ``FileNotFoundError``) so callers that
already catch those keep working; every message names the file and the
option or dataset at fault.
"""


class ElmoError(ValueError):
    """Base class of spacy-elmo's input errors."""


class ElmoOptionsError(ElmoError):
    """An options.json that cannot be read or describes an invalid model."""


class ElmoWeightsError(ElmoError):
    """A weights.hdf5 that cannot be read or does not fit its options."""


class ElmoFileNotFoundError(ElmoError, FileNotFoundError):
    """A file the user named does not exist."""
