"""The errors of the project's scripts (``scripts/*.py``, the steps of ``project.yml``)."""

from spacy_elmo.errors import ElmoError


class ProjectDataError(ElmoError):
    """A data file that is missing, malformed or not what the project pinned."""


class FetchError(ProjectDataError):
    """A package that cannot be downloaded, fails its sha256 check or lacks a file."""
