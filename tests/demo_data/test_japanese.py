"""The Japanese text builders (tetraformer.demo_data.japanese_prose and .japanese: `demo-data japanese_text`) on
handmade manual pages and HTML pages."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tetraformer.demo_data import japanese
from tetraformer.demo_data import japanese_prose as ja
from tetraformer.demo_data.formats import bert_text
from tetraformer.demo_data.options import Options

MAN_PAGE = r""".\" a comment line
.TH LS 1
.SH 名前
ls \- ディレクトリの内容を一覧表示する
.SH 説明
.B ls
はファイルの情報を表示する。
\fB\-a\fP オプションを指定すると、
 ドットで始まるファイルも表示する。
.PP
引数がなければカレントディレクトリの内容を表示する。
""".replace("、\n", "、 \n")  # a space at the end of a line, as manual pages have

HTML_PAGE = """<html><head><title>ヘルプ</title><style>p { color: red; }</style>
<script>var x = "スクリプトの中の文章は読まない。";</script></head>
<body><p>画像を開くには、ファイルメニューから開くを選択してください。
次にダイアログでファイルを選びます。</p>
<pre>for i in range(10): print(i)</pre><p>短い。</p>
<p>Only English text here, nothing Japanese at all.</p></body></html>"""


def test_roff_text_keeps_running_text_and_drops_requests_and_escapes() -> None:
    """Font macros stay as words, other requests and comments break paragraphs, escapes are removed."""
    sentences = list(ja.japanese_sentences(ja.roff_text(MAN_PAGE)))
    assert "ls はファイルの情報を表示する。" in sentences
    assert "-a オプションを指定すると、ドットで始まるファイルも表示する。" in sentences  # joined without the space
    assert "引数がなければカレントディレクトリの内容を表示する。" in sentences
    assert not any("comment" in s or "\\" in s for s in sentences)


def test_html_text_skips_scripts_and_styles_and_breaks_at_blocks() -> None:
    """Text in paragraphs is kept, a line break inside one is joined; scripts, styles and code are not."""
    sentences = list(ja.japanese_sentences(ja.html_text(HTML_PAGE)))
    assert sentences == [
        "画像を開くには、ファイルメニューから開くを選択してください。",
        "次にダイアログでファイルを選びます。",
    ]


def test_japanese_sentences_need_length_and_a_japanese_majority() -> None:
    """Too short, too long, or mostly Latin text is not a sentence to pretrain on."""
    text = "短い。\n\n" + "長" * 201 + "。\n\nThe value of x is 長い here.\n\nこれは十分に長い日本語の文です。"
    assert list(ja.japanese_sentences(text)) == ["これは十分に長い日本語の文です。"]


def write_doc(path: Path, text: str, gz: bool = False) -> Path:
    """Write a (gzipped) document, making its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def test_documents_keep_each_sentence_once_and_leave_out_excluded_ones(tmp_path: Path) -> None:
    """A sentence already read, or excluded (a held-out NER sentence), is not repeated; other files are ignored."""
    files = [
        write_doc(tmp_path / "usr/share/man/ja/man1/ls.1.gz", MAN_PAGE, gz=True),
        write_doc(tmp_path / "help/open.html", HTML_PAGE),
        write_doc(tmp_path / "help/copy.html", HTML_PAGE),  # every sentence already read: no document
        write_doc(tmp_path / "help/notes.txt", "これはテキストファイルの文です。"),
    ]
    exclude = {"次にダイアログでファイルを選びます。"}
    documents = ja.japanese_documents(files, exclude)
    assert len(documents) == 2
    assert documents[1] == ["画像を開くには、ファイルメニューから開くを選択してください。"]
    text = bert_text(documents)
    assert text.count("\n\n") == 1 and text.endswith("。\n")


class CharSegmenter:
    """A stand-in for janome: every character a morpheme, spaces included (janome emits them too)."""

    def tokenize(self, text: str) -> list[str]:
        """The characters of `text`."""
        return list(text)


def test_morphemes_are_separated_by_single_spaces() -> None:
    """Space tokens of the analyser are dropped; the morphemes are joined by one space."""
    assert ja.morphemes("ls は 速い", CharSegmenter()) == "l s は 速 い"


@pytest.mark.parametrize("limit", [None, 1])
def test_japanese_text_holds_out_ner_val_and_test_sentences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int | None
) -> None:
    """The corpus is split into morphemes, adds ner_ja's training sentences (their own morphemes, also under
    --limit, which caps the other documents) and never holds a val or test sentence."""
    names = {"train": "訓練", "val": "検証", "test": "試験"}
    tagged = {
        split: [[(f"{name}の文", "O"), (f"その{i}です", "O"), ("。", "O")] for i in range(3)]
        for split, name in names.items()
    }
    page = "<p>" + "".join(f"{name}の文その{i}です。" for name in names.values() for i in range(3)) + "</p>"
    pages = [write_doc(tmp_path / f"doc/{i}.html", page.replace("の文", f"の文{i}") + page) for i in range(3)]
    monkeypatch.setattr(japanese, "ner_ja_parts", lambda seed: tagged)
    monkeypatch.setattr(japanese, "JAPANESE_DOC_PACKAGES", ("docs-ja",))
    monkeypatch.setattr(japanese, "apt_packages_files", lambda packages: dict.fromkeys(packages, pages))
    monkeypatch.setattr(japanese, "janome_segmenter", CharSegmenter)
    japanese.build_japanese_text(tmp_path / "out", Options(seed=0, limit=limit))
    train = (tmp_path / "out/ja_text/train.txt").read_text(encoding="utf-8").split("\n")
    val = (tmp_path / "out/ja_text/val.txt").read_text(encoding="utf-8").split("\n")
    lines = set(train + val) - {""}
    assert {f"訓練の文 その{i}です 。" for i in range(3)} <= lines  # ner_ja's own morphemes
    split_by_janome = {" ".join(f"訓練の文{d}その{i}です。") for d in range(3) for i in range(3)}
    assert len(split_by_janome & lines) == (3 if limit else 9)
    assert not any(line.replace(" ", "").startswith(("検証の文その", "試験の文その")) for line in lines)
    other_documents = {" ".join(f"検証の文{d}その0です。") for d in range(3)}  # their held-out-looking sentences stay
    assert len(other_documents & lines) == (1 if limit else 3)


def test_japanese_manuals_hold_no_ner_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cross-validation corpus keeps the manuals' sentences and no sentence of any ner_ja split."""
    names = {"train": "訓練", "val": "検証", "test": "試験"}
    tagged = {split: [[(f"{name}の文です", "O"), ("。", "O")]] for split, name in names.items()}
    page = "<p>" + "".join(f"{name}の文です。" for name in names.values()) + "画像を開くには選択します。</p>"
    pages = [write_doc(tmp_path / f"doc/{i}.html", page.replace("画像", f"画像{i}")) for i in range(3)]
    monkeypatch.setattr(japanese, "ner_ja_parts", lambda seed: tagged)
    monkeypatch.setattr(japanese, "JAPANESE_DOC_PACKAGES", ("docs-ja",))
    monkeypatch.setattr(japanese, "apt_packages_files", lambda packages: dict.fromkeys(packages, pages))
    monkeypatch.setattr(japanese, "janome_segmenter", CharSegmenter)
    japanese.build_japanese_manuals(tmp_path / "out", Options(seed=0, limit=None))
    text = "".join((tmp_path / f"out/ja_manuals/{s}.txt").read_text(encoding="utf-8") for s in ("train", "val"))
    lines = set(text.split("\n")) - {""}
    assert lines == {" ".join(f"画像{i}を開くには選択します。") for i in range(3)}
