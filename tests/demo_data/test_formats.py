"""tetraformer.demo_data.formats on tiny handmade inputs: splitting, parsing and writing, no source packages."""

from __future__ import annotations

import csv
import gzip
import json
import struct
from pathlib import Path

import pytest

from tetraformer.demo_data import formats as fmt


def test_split_items_is_seeded_disjoint_and_complete() -> None:
    """Same seed, same parts; parts are sized by the fractions and cover every item once."""
    items = list(range(100))
    parts = fmt.split_items(items, [0.8, 0.1, 0.1], seed=7)
    assert [len(p) for p in parts] == [80, 10, 10]
    assert sorted(x for p in parts for x in p) == items
    assert parts == fmt.split_items(items, [0.8, 0.1, 0.1], seed=7)
    assert parts != fmt.split_items(items, [0.8, 0.1, 0.1], seed=8)


def test_stratified_split_keeps_every_label_in_every_part() -> None:
    """Each label is split 90/10 on its own, so a rare label still reaches the small part."""
    rows = [("a", i) for i in range(90)] + [("b", i) for i in range(10)]
    train, val = fmt.stratified_split(rows, lambda r: r[0], [0.9, 0.1], seed=0)
    assert (len(train), len(val)) == (90, 10)
    assert sum(r[0] == "b" for r in val) == 1


def test_split_text_cuts_at_a_paragraph_break() -> None:
    """The cut lands on the first blank line after 90% of the characters; nothing is lost."""
    text = "\n\n".join(f"Para {i}.\nsecond line {i}" for i in range(20)) + "\n"
    train, val = fmt.split_text(text, 0.9)
    assert train.endswith("second line 18\n") and val.startswith("Para 19.")
    assert len(train) >= 0.9 * len(text) - 2
    assert train + "\n" + val == text


def test_sample_indices_is_sorted_and_capped() -> None:
    """A cap returns a seeded sorted subset; no cap returns everything."""
    assert fmt.sample_indices(5, None, 0) == [0, 1, 2, 3, 4]
    picked = fmt.sample_indices(100, 10, 0)
    assert len(picked) == 10 and picked == sorted(picked) and picked == fmt.sample_indices(100, 10, 0)


# --------------------------------------------------------------------------- parsers


def test_parse_ding_line_aligns_fields_and_drops_annotations() -> None:
    """One pair per '|' field, first synonym per side, {} [] () /ABBR/ annotations removed."""
    line = "Aalleiter {f}; Aaltreppe {f} (Wasserbau) | Aalleitern {pl} :: eel ladder [Br.]; fish pass | eel ladders"
    assert fmt.parse_ding_line(line) == [("Aalleiter", "eel ladder"), ("Aalleitern", "eel ladders")]
    assert fmt.parse_ding_line("Atomenergiekommission {f} :: Atomic Energy Commission /AEC/") == [
        ("Atomenergiekommission", "Atomic Energy Commission")
    ]
    assert fmt.parse_ding_line("Er war froh (darüber), dass es ging. :: He was glad.") == [
        ("Er war froh, dass es ging.", "He was glad.")
    ]


def test_parse_ding_line_skips_comments_mismatches_and_slash_alternatives() -> None:
    """Comments, unaligned '|' fields and a/b slash alternatives yield no pair (next synonym is used)."""
    assert fmt.parse_ding_line("# Version :: devel 2023-01-30") == []
    assert fmt.parse_ding_line("A | B :: a") == []
    assert fmt.parse_ding_line("Rate {f} :: rate of decomposition/degradation; decay rate") == [("Rate", "decay rate")]
    assert fmt.parse_ding_line("abhalten/halten :: to hold/keep") == []


def test_read_orange_tab_skips_the_three_header_lines() -> None:
    """Column names come from line one; the type and flag lines and blank lines are skipped."""
    text = "Category\tText\nd\tstring\nclass\t\n\nearn\tprofit rose\nacq\tbuys, firm\n"
    assert fmt.read_orange_tab(text) == [
        {"Category": "earn", "Text": "profit rose"},
        {"Category": "acq", "Text": "buys, firm"},
    ]


def test_read_iob_sentences_repairs_bio_and_drops_space_tokens() -> None:
    """First column is the token, last the tag; a stray I- becomes B-; U+3000 tokens are dropped."""
    text = "東京\tX\tB-LOC\n都\tX\tI-LOC\n\u3000\tX\tI-LOC\nに\tX\tO\n\n太郎\tI-PSN\n\n\n"
    assert fmt.read_iob_sentences(text) == [
        [("東京", "B-LOC"), ("都", "I-LOC"), ("に", "O")],
        [("太郎", "B-PSN")],
    ]


def test_read_idx_reads_a_gzipped_uint8_array(tmp_path: Path) -> None:
    """The IDX header gives the shape; the body is uint8 pixels."""
    path = tmp_path / "tiny-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(b"\x00\x00\x08\x03" + struct.pack(">3I", 2, 2, 3) + bytes(range(12))))
    array = fmt.read_idx(path)
    assert array.shape == (2, 2, 3) and array[1, 1, 2] == 11


# --------------------------------------------------------------------------- writers


def test_write_conll_writes_tab_separated_sentences(tmp_path: Path) -> None:
    """token<TAB>tag per line and a blank line after each sentence; whitespace tokens are refused."""
    path = tmp_path / "ner" / "train.conll"
    assert fmt.write_conll(path, [[("東京", "B-LOC"), ("に", "O")], [("行く", "O")]]) == 2
    assert path.read_text(encoding="utf-8") == "東京\tB-LOC\nに\tO\n\n行く\tO\n\n"
    with pytest.raises(ValueError, match="bad CoNLL token"):
        fmt.write_conll(path, [[("two words", "O")]])


def test_write_csv_and_jsonl_round_trip(tmp_path: Path) -> None:
    """Commas, quotes and newlines survive CSV quoting; JSONL keeps non-ASCII text unescaped."""
    rows = [{"text": 'a, "quoted"\nline', "label": "x"}]
    assert fmt.write_csv(tmp_path / "t.csv", rows, ("text", "label")) == 1
    with (tmp_path / "t.csv").open(encoding="utf-8", newline="") as f:
        assert list(csv.DictReader(f)) == rows
    fmt.write_jsonl(tmp_path / "t.jsonl", [{"source": "Größe", "target": "size"}])
    line = (tmp_path / "t.jsonl").read_text(encoding="utf-8")
    assert "Größe" in line and json.loads(line) == {"source": "Größe", "target": "size"}
