"""What the NER baseline and the NER cross-validation share: CoNLL reading, word-shape features, a linear-chain CRF
(sklearn-crfsuite) or an averaged perceptron (numpy), scored with the token-classification task's own entity metric
(seqeval through EntityScore, micro entity F1). A library for scripts/, never run itself; its users:

    python scripts/baselines.py ner --train data/ner_en/train.conll --test data/ner_en/test.conll
    python scripts/cross_validate_ner.py --data data/ner_ja/*.conll --folds 10 --out runs/cv_ner_ja ...

Features are the standard word-shape ones: the word lower-cased, its 2- and 3-letter prefixes and suffixes, its
shape (Xx, dd, ...), title / upper / digit flags, the same for the words at -2..+2, and sentence start / end.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import torch

from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.conll import TaggedSentence, read_conll
from tetraformer.data.tag_schemes import tag_problem, to_canonical
from tetraformer.training.metrics.entity import EntityScore

Tagged = tuple[list[str], list[str]]  # (words, tags)


def tagged_sentences(path: Path, scheme: str = "IOB2") -> Iterator[tuple[TaggedSentence, Tagged]]:
    """Each sentence of a CoNLL file (word first, tag last) with its words and tags in the scheme's canonical form
    (IOB1 -> IOB2); a tag outside the scheme is a DataError naming the file and line."""
    for sentence in read_conll(path, check_tag=partial(tag_problem, scheme=scheme)):
        yield sentence, (sentence.tokens, to_canonical(sentence.tags or [], scheme))


def read_tagged(path: Path, scheme: str = "IOB2") -> list[Tagged]:
    """The (words, canonical tags) of a CoNLL file's sentences (`tagged_sentences`)."""
    return [tagged for _, tagged in tagged_sentences(path, scheme)]


def shape(word: str) -> str:
    """Word shape with runs collapsed: "McDonald" -> "XxXx", "1987" -> "d", "U.S." -> "X.X."."""
    mapped = re.sub(r"\d", "d", re.sub(r"[A-Z]", "X", re.sub(r"[a-z]", "x", word)))
    return re.sub(r"(.)\1+", r"\1", mapped)


def word_features(word: str, prefix: str) -> dict[str, str | bool]:
    """One word's features, names prefixed with its offset ("-1:", "", ...)."""
    return {
        f"{prefix}lower": word.lower(),
        f"{prefix}shape": shape(word),
        f"{prefix}title": word.istitle(),
        f"{prefix}upper": word.isupper(),
        f"{prefix}digit": word.isdigit(),
    }


def sentence_features(words: Sequence[str]) -> list[dict[str, str | bool]]:
    """Features of each word of a sentence: its own (with affixes) and those of its neighbours at -2..+2."""
    rows = []
    for i, word in enumerate(words):
        row: dict[str, str | bool] = {"bias": True, **word_features(word, "")}
        row.update({"pre2": word[:2], "pre3": word[:3], "suf2": word[-2:], "suf3": word[-3:]})
        for offset in (-2, -1, 1, 2):
            j = i + offset
            if 0 <= j < len(words):
                row.update(word_features(words[j], f"{offset:+d}:"))
        row["BOS"], row["EOS"] = i == 0, i == len(words) - 1
        rows.append(row)
    return rows


def feature_strings(row: dict[str, str | bool]) -> list[str]:
    """A feature dict as the names of its active indicator features."""
    return [f"{k}={v}" for k, v in row.items() if not isinstance(v, bool)] + [k for k, v in row.items() if v is True]


class AveragedPerceptron:
    """Greedy left-to-right tagger: averaged perceptron over the word features and the previous predicted tag."""

    def __init__(self, epochs: int = 5, seed: int = 0) -> None:
        self.epochs, self.seed = epochs, seed
        self.tags: list[str] = []
        self.index: dict[str, int] = {}
        self.weights = np.zeros((0, 0))

    def fit(self, xs: Sequence[list[dict[str, str | bool]]], ys: Sequence[list[str]]) -> AveragedPerceptron:
        """Train on feature rows and tags; the weights end as their average over every update step."""
        self.tags = sorted({t for y in ys for t in y})
        names = {f for x in xs for row in x for f in feature_strings(row)} | {f"prev={t}" for t in ["<s>", *self.tags]}
        self.index = {name: i for i, name in enumerate(sorted(names))}
        weights = np.zeros((len(self.index), len(self.tags)))  # (F, T)
        stamped = np.zeros_like(weights)  # sum of step * update, for the averaging trick
        encoded = [[self.ids(row) for row in x] for x in xs]
        tag_id = {t: i for i, t in enumerate(self.tags)}
        rng, step = np.random.default_rng(self.seed), 1
        for _ in range(self.epochs):
            for n in rng.permutation(len(xs)):
                prev = "<s>"
                for ids, gold in zip(encoded[n], ys[n], strict=True):
                    ids = np.append(ids, self.index[f"prev={prev}"])
                    guess = int(weights[ids].sum(0).argmax())
                    if guess != tag_id[gold]:
                        for sign, tag in ((1.0, tag_id[gold]), (-1.0, guess)):
                            weights[ids, tag] += sign
                            stamped[ids, tag] += sign * step
                    prev = self.tags[guess]
                    step += 1
        self.weights = weights - stamped / step
        return self

    def ids(self, row: dict[str, str | bool]) -> np.ndarray:
        """Indices of a row's known features."""
        return np.array([self.index[f] for f in feature_strings(row) if f in self.index], dtype=np.int64)

    def predict(self, xs: Sequence[list[dict[str, str | bool]]]) -> list[list[str]]:
        """Tags of each sentence, left to right."""
        out = []
        for x in xs:
            prev, tags = "<s>", []
            for row in x:
                ids = np.append(self.ids(row), self.index[f"prev={prev}"])
                prev = self.tags[int(self.weights[ids].sum(0).argmax())]
                tags.append(prev)
            out.append(tags)
        return out


def build_model(name: str, epochs: int) -> object:
    """A fresh `crf` (sklearn-crfsuite, L-BFGS with L1 + L2) or `perceptron` tagger."""
    if name == "perceptron":
        return AveragedPerceptron(epochs=epochs)
    try:
        import sklearn_crfsuite
    except ImportError:
        sys.exit("the CRF needs sklearn-crfsuite: pip install sklearn-crfsuite (or --model perceptron)")
    return sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=200, all_possible_transitions=True)


def entity_scores(true: Sequence[list[str]], predicted: Sequence[list[str]], strict: bool = False) -> list[list]:
    """The task's per-type report rows ([type, precision, recall, f1, support], then micro and macro averages)."""
    labels = ["O", *sorted({t for y in [*true, *predicted] for t in y} - {"O"})]
    metric = EntityScore(labels, scheme="IOB2", strict=strict)
    tag_id = {t: i for i, t in enumerate(labels)}
    width = max(len(y) for y in true)
    for gold, guess in zip(true, predicted, strict=True):
        targets = torch.full((1, width), IGNORE_INDEX)
        preds = torch.zeros((1, width), dtype=torch.long)
        targets[0, : len(gold)] = torch.tensor([tag_id[t] for t in gold])
        preds[0, : len(guess)] = torch.tensor([tag_id[t] for t in guess])
        metric.update(preds, targets)
    return metric.report_rows()


def fit_tagger(train: Sequence[Tagged], model: str = "crf", epochs: int = 5) -> object:
    """A `crf` or `perceptron` tagger fitted on tagged sentences."""
    tagger = build_model(model, epochs)
    tagger.fit([sentence_features(w) for w, _ in train], [t for _, t in train])
    return tagger


def predict_tags(tagger: object, words: Sequence[Sequence[str]]) -> list[list[str]]:
    """A fitted tagger's tags for each sentence's words."""
    return [list(tags) for tags in tagger.predict([sentence_features(w) for w in words])]


def score(tagger: object, test: Sequence[Tagged]) -> tuple[list[list[str]], list[list]]:
    """A fitted tagger's predicted tags on `test` and the entity report rows."""
    predicted = predict_tags(tagger, [w for w, _ in test])
    return predicted, entity_scores([t for _, t in test], predicted)
