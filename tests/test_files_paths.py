"""spacy_elmo.files.paths: files that must exist."""

import pytest


def test_a_device_given_as_a_file_says_what_it_is():
    from spacy_elmo.errors import ElmoError
    from spacy_elmo.files.paths import require_file

    with pytest.raises(ElmoError, match=r"^weight file /dev/null is a character device, not a regular file: give"):
        require_file("/dev/null", "weight file")
