"""`tetraformer vectors`: static word vectors counted from your own unlabelled text (PPMI + SVD), written as the
`vectors.npy` + `words.tsv` directory `--model.word_vectors.path` reads."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from tetraformer.cli.parser import CommandParser
from tetraformer.data.conll import file_sentences, sentence_format
from tetraformer.data.errors import DataError

log = logging.getLogger(__name__)


def count_vectors_main(argv: list[str]) -> None:
    """`tetraformer vectors --input FILES --output DIR [--dims N --window N --min-count N --format F ...]`."""
    parser = CommandParser(
        prog="tetraformer vectors",
        description="Count word vectors from unlabelled text: positive PMI of co-occurrences, reduced by an SVD.",
    )
    parser.add_argument("--input", nargs="+", required=True, help="files, directories or globs")
    parser.add_argument(
        "--format",
        choices=["auto", "text", "conll", "jsonl"],
        default="auto",
        help="auto: .conll/.bio/.iob/.tsv are CoNLL (first column), .jsonl/.json JSONL, anything else (.txt too) "
        "raw text, one sentence per line, words split on whitespace",
    )
    parser.add_argument("--dims", type=int, default=300, help="vector length (a tagger projects them onto d_model)")
    parser.add_argument("--window", type=int, default=5, help="words on each side that count as context")
    parser.add_argument("--min-count", type=int, default=2, help="rarer words get no vector")
    parser.add_argument("--seed", type=int, default=0, help="of the SVD's random probe (the same text, same vectors)")
    parser.add_argument(
        "--chunk-words",
        type=int,
        help="words whose pairs are summed at once (default 4,000,000): memory follows it and the distinct pairs, "
        "never the text's length",
    )
    parser.add_argument("--output", type=Path, required=True, help="directory for vectors.npy and words.tsv")
    args = parser.parse_args(argv)
    for name in ("dims", "window", "min_count", "chunk_words"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")

    from tetraformer.data import resolve_files
    from tetraformer.data.count_vectors import CountVectorOptions, count_word_vectors
    from tetraformer.data.word_vectors import write_word_vectors

    files = [f for spec in args.input for f in resolve_files(spec)]
    chunk = {"chunk_words": args.chunk_words} if args.chunk_words else {}  # else the options' default
    options = CountVectorOptions(args.dims, args.window, args.min_count, seed=args.seed, **chunk)
    vectors = count_word_vectors(SentenceFiles(files, args.format), options)
    write_word_vectors(args.output, vectors.table, vectors.rows)
    log.info("%d words x %d dims from %d files -> %s", len(vectors.rows), vectors.dims, len(files), args.output)


class SentenceFiles:
    """The words of each sentence of the files, read afresh at each pass (the counter makes two), so that no file
    is held in memory; a file without sentences is a DataError naming it."""

    def __init__(self, files: Sequence[Path], chosen: str) -> None:
        self.formats = [(path, input_format(path, chosen)) for path in files]  # told once, before the first pass

    def __iter__(self) -> Iterator[list[str]]:
        for path, fmt in self.formats:
            empty = True
            for sentence in file_sentences(path, fmt, labelled=False):
                empty = False
                yield sentence.tokens
            if empty:
                raise DataError("file has no sentences", path)


def input_format(path: Path, chosen: str) -> str:
    """The format a vectors input is read in: the chosen one, else CoNLL or JSONL by suffix, else raw text."""
    if chosen != "auto":
        return chosen
    if path.suffix.lower() == ".txt":
        return "text"
    try:
        return sentence_format(path)  # .conll, .jsonl, a Parquet/Arrow table, ...
    except DataError:
        return "text"  # a suffix no sentence format claims
