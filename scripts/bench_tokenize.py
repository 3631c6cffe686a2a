"""Token-store build throughput against the tokenizer's own batch encoding of the same text, in one run.

    python scripts/bench_tokenize.py --tokenizer TOKENIZER_DIR "data/gutenberg/*.txt" [--documents file] [--markdown]

Three timings over the same files, one after another, each reading the files from disk as it goes:
- `tokenizer(lines)`: transformers' fast-tokenizer call on batches of 1000 lines (what a user would write);
- `encode_batch_fast`: the `tokenizers` backend's own batch call without offsets, on the same batches;
- the token store build (`corpus_store`, as `fit` and `tetraformer prepare` run it) into a temporary folder.
Each row gives tokens, wall and CPU seconds (all threads of this process), MB/s of text by the chosen --clock, and
that time against the fastest of the two tokenizer rows (issue 23 asks for at most 1.5x). On a busy machine
`--clock cpu` with RAYON_NUM_THREADS=1 gives steady ratios. `--num-proc N` adds a build in N processes, always
timed by the wall clock.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench_common import add_clock_option, format_rows

from tetraformer.accel.chooser import cpu_flags, cpu_model
from tetraformer.data.corpus_store import corpus_store
from tetraformer.data.files import resolve_files
from tetraformer.data.lines import iter_lines
from tetraformer.data.tokenizer import load_tokenizer

LINES_PER_BATCH = 1000


def line_batches(paths: list[Path], encoding: str) -> Iterator[list[str]]:
    """The files' lines, in order, in batches of LINES_PER_BATCH."""
    batch: list[str] = []
    for path in paths:
        for _, line in iter_lines(path, encoding):
            batch.append(line)
            if len(batch) == LINES_PER_BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def own_call(tokenizer: object, paths: list[Path]) -> int:
    """Tokens of `tokenizer(lines)` over every batch."""
    encode = tokenizer  # transformers' PreTrainedTokenizerFast.__call__
    return sum(sum(map(len, encode(b, add_special_tokens=False)["input_ids"])) for b in line_batches(paths, "utf-8"))


def backend_call(tokenizer: object, paths: list[Path]) -> int:
    """Tokens of the backend's `encode_batch_fast(lines)` over every batch."""
    backend = tokenizer.backend_tokenizer  # type: ignore[attr-defined]
    batches = line_batches(paths, "utf-8")
    return sum(sum(len(e.ids) for e in backend.encode_batch_fast(b, add_special_tokens=False)) for b in batches)


def store_build(tokenizer: object, paths: list[Path], documents: str, num_proc: int = 1) -> int:
    """Tokens of a token store built from scratch in a temporary cache folder."""
    options = {"format": "auto", "field": "text", "documents": documents, "encoding": "utf-8"}
    with tempfile.TemporaryDirectory() as cache:
        files = [str(p) for p in paths]
        return corpus_store("bench", files, tokenizer, options, cache, num_proc=num_proc).n_tokens


def timed(run: Callable[[], int]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, tokens) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    tokens = run()
    return time.perf_counter() - wall, time.process_time() - cpu, tokens


def main() -> None:
    """Time the three rows and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="text files, folders or globs")
    parser.add_argument("--tokenizer", required=True, help="a tokenizer folder (tokenizer.json)")
    parser.add_argument("--documents", choices=["file", "paragraph", "line"], default="file")
    parser.add_argument("--num-proc", type=int, default=1, help="also time the build with --data.num_proc N")
    parser.add_argument("--markdown", action="store_true")
    add_clock_option(parser)
    args = parser.parse_args()
    paths = resolve_files(args.files)
    tokenizer = load_tokenizer(Path(args.tokenizer))
    size = sum(p.stat().st_size for p in paths)
    runs = {
        "tokenizer(lines), batches of 1000": lambda: own_call(tokenizer, paths),
        "backend encode_batch_fast(lines)": lambda: backend_call(tokenizer, paths),
        f"token store build (documents: {args.documents})": lambda: store_build(tokenizer, paths, args.documents),
    }
    if args.num_proc > 1:
        name = f"token store build, num_proc {args.num_proc} (wall clock)"
        runs[name] = lambda: store_build(tokenizer, paths, args.documents, args.num_proc)
    results = {name: timed(run) for name, run in runs.items()}
    pooled = {name for name in results if "num_proc" in name}  # its processes' CPU time is not this process's
    seconds = {n: (cpu if args.clock == "cpu" and n not in pooled else wall) for n, (wall, cpu, _) in results.items()}
    fastest = min(list(seconds.values())[:2])
    table = [["run", "tokens", "wall s", "CPU s", "MB/s", f"{args.clock} time vs fastest tokenizer row"]]
    for name, (wall, cpu, tokens) in results.items():
        mb_s = size / 1e6 / seconds[name]
        table.append(
            [name, f"{tokens:,}", f"{wall:.2f}", f"{cpu:.2f}", f"{mb_s:.2f}", f"{seconds[name] / fastest:.2f}x"]
        )
    print(f"{len(paths)} file(s), {size / 1e6:.1f} MB; CPU: {cpu_model()} [{' '.join(cpu_flags())}]")
    print(format_rows(table, args.markdown, text_columns=1))


if __name__ == "__main__":
    main()
