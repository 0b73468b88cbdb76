"""The sanity bounds of a biLM's sizes, whichever schema gives them (options.json's
``ElmoOptions``, ELMoForManyLangs' network config ``EfmlNetwork``), checked before anything
is allocated: far above any published biLM (the largest has lstm.dim 4096, projection_dim
512, 2 layers), far below what would exhaust memory or run for minutes before failing."""

# The char CNN's activations an options file may name (ELMoForManyLangs' configs name the same).
ACTIVATIONS = ("relu", "tanh")
MAX_SIZES = {
    "char_dim": 4096,
    "projection_dim": 16384,
    "lstm_dim": 65536,
    "n_layers": 64,
    "n_highway": 64,
    "max_characters_per_token": 1024,
}
MAX_FILTERS = 64  # [width, n_filters] pairs
MAX_FILTER_COUNT = 65536  # n_filters of one pair
# Ten times the largest published biLM's 93.6 million (4 GB in float32): larger
# options come from a damaged or mistyped file.
MAX_PARAMETERS = 1_000_000_000
