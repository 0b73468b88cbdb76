"""What a pipeline's docs weigh once written: DocBin bytes per token for each ``store``.

    python benchmarks/bench_doc_size.py PIPELINE_DIR TEXT_FILE [--docs 50]

The pipeline is loaded once per setting, with ``[components.elmo] store`` and
``store_dtype`` overridden at load (the user's way to ask for the layers), runs
the first ``--docs`` lines of TEXT_FILE, and the docs are written as
``spacy apply`` writes them (``DocBin(store_user_data=True)``). Prints the bytes
per token of each setting beside the annotations alone (``store_user_data=False``).
Sizes, not timings: any machine, busy or not.
"""

import argparse
from pathlib import Path
from typing import List, Tuple

import spacy
from spacy.tokens import DocBin

SETTINGS: List[Tuple[str, str]] = [
    ("none", "float32"),
    ("mix", "float16"),
    ("mix", "float32"),
    ("all", "float16"),
    ("all", "float32"),
]


def written_bytes(pipeline: Path, texts: List[str], store: str, dtype: str, user_data: bool) -> Tuple[int, int]:
    """(bytes of the DocBin, tokens) of the texts run through the pipeline at that setting."""
    nlp = spacy.load(pipeline, config={"components": {"elmo": {"store": store, "store_dtype": dtype}}})
    docs = list(nlp.pipe(texts))
    data = DocBin(docs=docs, store_user_data=user_data).to_bytes()
    return len(data), sum(len(doc) for doc in docs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline", type=Path)
    parser.add_argument("text", type=Path)
    parser.add_argument("--docs", type=int, default=50)
    args = parser.parse_args()
    lines = args.text.read_text(encoding="utf8").splitlines()
    texts = [line for line in lines if line.strip()][: args.docs]
    floor, tokens = written_bytes(args.pipeline, texts, "none", "float32", user_data=False)
    print(f"{len(texts)} docs, {tokens} tokens of {args.text}; pipeline {args.pipeline}")
    print(f"annotations only (store_user_data=False): {floor:,} bytes, {floor / tokens:.1f} bytes/token")
    for store, dtype in SETTINGS:
        size, _ = written_bytes(args.pipeline, texts, store, dtype, user_data=True)
        print(f"store={store} store_dtype={dtype}: {size:,} bytes, {size / tokens:.1f} bytes/token")


if __name__ == "__main__":
    main()
