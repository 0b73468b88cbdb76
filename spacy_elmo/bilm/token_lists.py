"""``embed_batch``'s input checked: a list of sentences, each a list of str tokens."""

from typing import List, Sequence

from ..errors import ElmoInputError


def token_lists(sentences: Sequence[Sequence[str]]) -> List[List[str]]:
    """The sentences as lists of str tokens; a str sentence (whose characters would
    pass for tokens) or a non-str token is refused."""
    if isinstance(sentences, str):
        raise ElmoInputError("embed_batch takes a list of sentences (each a list of token strings), got one str")
    result = []
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise ElmoInputError(
                f"embed_batch: sentence {i} is a str ({sentence[:40]!r}), not a list of tokens: "
                f"split it first, e.g. {sentence.split()[:4]!r}"
            )
        tokens = list(sentence)
        for j, token in enumerate(tokens):
            if not isinstance(token, str):
                raise ElmoInputError(
                    f"embed_batch: sentence {i}, token {j} is {type(token).__name__} {token!r}: tokens must be str"
                )
        result.append(tokens)
    return result
