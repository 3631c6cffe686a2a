"""NER baselines on CoNLL files: a linear-chain CRF (sklearn-crfsuite) or an averaged perceptron (numpy) fitted on
--train, its entity report (the token-classification task's own metric) printed for --test (and --val).

    python scripts/baselines.py ner --train data/ner_en/train.conll --test data/ner_en/test.conll
    python scripts/baselines_ner.py --model perceptron ...   # the same script; no sklearn-crfsuite needed

The taggers and their features live in baselines_common.py (cross_validate_ner.py uses them too).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from baselines_common import fit_tagger, read_tagged, score

from tetraformer.data import DataError
from tetraformer.data.tag_schemes import canonical_scheme


def main(argv: list[str] | None = None) -> None:
    """Fit on --train, print the entity report on --test (and --val when given)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=Path("data/ner_en/train.conll"))
    parser.add_argument("--val", type=Path)
    parser.add_argument("--test", type=Path, default=Path("data/ner_en/test.conll"))
    parser.add_argument("--model", choices=["crf", "perceptron"], default="crf")
    parser.add_argument("--tag_scheme", default="IOB2", help="the files' scheme: IOB2, or IOB1 (converted to IOB2)")
    parser.add_argument("--epochs", type=int, default=5, help="perceptron passes over the training sentences")
    args = parser.parse_args(argv)
    if canonical_scheme(args.tag_scheme) != "IOB2":
        sys.exit("only IOB2 (or IOB1, converted) files are scored here")
    start = time.perf_counter()
    try:
        train = read_tagged(args.train, args.tag_scheme)
    except DataError as err:
        sys.exit(f"error: {err}")
    tagger = fit_tagger(train, args.model, args.epochs)
    sys.stdout.write(f"{args.model} fitted on {args.train} in {time.perf_counter() - start:.1f} s\n")
    for split, path in (("val", args.val), ("test", args.test)):
        if path is None:
            continue
        try:
            _, rows = score(tagger, read_tagged(path, args.tag_scheme))
        except DataError as err:
            sys.exit(f"error: {err}")
        sys.stdout.write(f"{split}: {path}\n")
        sys.stdout.write("| type | precision | recall | f1 | support |\n|---|---:|---:|---:|---:|\n")
        for name, p, r, f, n in rows:
            sys.stdout.write(f"| {name} | {p:.4f} | {r:.4f} | {f:.4f} | {n} |\n")
        micro = next(row for row in rows if row[0] == "micro avg")
        sys.stdout.write(f"{split} entity F1 (micro) {micro[3]:.4f}\n")


if __name__ == "__main__":
    main()
