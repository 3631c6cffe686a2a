"""TF-IDF + linear SVM on a text-classification split: the baseline the transformers are compared with.

    tetraformer demo-data reuters
    python scripts/baselines.py --train data/reuters/train.csv --test data/reuters/test.csv
    python scripts/baselines.py --train data/word_senses/train.csv --test data/word_senses/test.csv \
        --text_field sentence --pair_field definition   # pairs: [A, B, A*B] TF-IDF features
    python scripts/baselines.py ner --train data/ner_en/train.conll --test data/ner_en/test.conll  # baselines_ner.py
    python scripts/baselines.py lm --train data/shakespeare/train.txt --val data/shakespeare/val.txt  # baselines_lm.py
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

from scipy.sparse import csr_matrix, hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import accuracy_score, f1_score
from sklearn.svm import LinearSVC

SIBLINGS = {"ner": "baselines_ner.py", "lm": "baselines_lm.py"}  # `baselines.py ner|lm ...` runs these


def read_split(path: Path, fields: list[str], label_field: str) -> tuple[list[list[str]], list[str]]:
    """Each field's texts (one list per field) and the labels of a CSV split."""
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return [[r[field] for r in rows] for field in fields], [r[label_field] for r in rows]


def features(vectorizer: TfidfVectorizer, texts: list[list[str]]) -> csr_matrix:
    """TF-IDF of one text, or of a pair: both halves and their elementwise product (the words they share)."""
    parts = [vectorizer.transform(t) for t in texts]
    if len(parts) == 2:
        parts.append(parts[0].multiply(parts[1]))
    return hstack(parts).tocsr()


def sibling_command(argv: list[str]) -> list[str]:
    """`ner ARGS` / `lm ARGS` as the command line of the baseline script that runs it."""
    return [sys.executable, str(Path(__file__).with_name(SIBLINGS[argv[0]])), *argv[1:]]


def main(argv: list[str] | None = None) -> None:
    """Fit TF-IDF (uni+bigrams, sublinear tf) + LinearSVC on train; print test accuracy and macro-F1.

    `ner ...` runs the NER baseline instead (scripts/baselines_ner.py: CRF or averaged perceptron on CoNLL), `lm ...`
    the language-model one (scripts/baselines_lm.py: character n-grams with Kneser-Ney smoothing).
    """
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in SIBLINGS:  # a script of its own, run in its own process (no script imports another)
        raise SystemExit(subprocess.call(sibling_command(argv)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=Path("data/reuters/train.csv"))
    parser.add_argument("--test", type=Path, default=Path("data/reuters/test.csv"))
    parser.add_argument("--text_field", default="text")
    parser.add_argument("--pair_field", default=None, help="a second text field: sentence-pair classification")
    parser.add_argument("--label_field", default="label")
    args = parser.parse_args(argv)
    fields = [args.text_field] + ([args.pair_field] if args.pair_field else [])
    train_x, train_y = read_split(args.train, fields, args.label_field)
    test_x, test_y = read_split(args.test, fields, args.label_field)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2).fit([t for ts in train_x for t in ts])
    model = LinearSVC(C=1.0).fit(features(vectorizer, train_x), train_y)
    predicted = model.predict(features(vectorizer, test_x))
    sys.stdout.write(
        f"TF-IDF + LinearSVC: accuracy {accuracy_score(test_y, predicted):.4f}  "
        f"macro-F1 {f1_score(test_y, predicted, average='macro'):.4f}\n"
    )


if __name__ == "__main__":
    main()
