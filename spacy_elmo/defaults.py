"""Defaults the command line shares with the library, in a module that imports nothing
(``python -m spacy_elmo ... --help`` stays free of torch and spaCy)."""

# Tokens the biLM sees at once: a longer sentence (or a doc without sentences) runs in
# overlapping windows of this many (bilm/windows.py): the component's `max_segment_length`
# and `embed --max-length` default.
DEFAULT_MAX_SEGMENT_LENGTH = 256
