"""The files of an ELMoForManyLangs model directory, by name, and the one-line hint that
says what such a directory holds (every EFML reader's messages end with it)."""

from ..bilm.efml_vocab import CHAR_DIC, WORD_DIC

CONFIG_NAME = "config.json"
TOKEN_EMBEDDER_NAME = "token_embedder.pkl"
ENCODER_NAME = "encoder.pkl"
EFML_DIR_HINT = (
    f"an ELMoForManyLangs model directory holds {CONFIG_NAME}, {CHAR_DIC} and/or {WORD_DIC}, "
    f"{TOKEN_EMBEDDER_NAME} and {ENCODER_NAME}"
)
