"""Tests for scripts/prepare_data.py on tiny handmade inputs: no network, no source packages."""

from __future__ import annotations

import csv
import gzip
import json
import logging
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import prepare_data  # noqa: E402
import prepare_data_formats as fmt  # noqa: E402
import prepare_data_sources as src  # noqa: E402

# --------------------------------------------------------------------------- splitting


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


# --------------------------------------------------------------------------- sources


def test_run_command_reports_the_last_line_of_output() -> None:
    """A failing command becomes one SourceUnavailable line carrying its last stderr line."""
    cmd = [sys.executable, "-c", "import sys; print('noise'); sys.exit('ERROR: no such package')"]
    with pytest.raises(src.SourceUnavailable, match="^pip failed: ERROR: no such package$"):
        src.run_command(cmd, "pip failed")


def test_pip_package_dir_finds_an_installed_package_without_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """A package that is already importable is located without running pip."""
    monkeypatch.setattr(src, "run_command", lambda *a, **k: pytest.fail("pip must not run"))
    assert src.pip_package_dir("anything", "json").name == "json"


def test_apt_install_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root the error says which command to run instead of failing inside apt-get."""
    monkeypatch.setattr(src.os, "geteuid", lambda: 1000, raising=False)
    with pytest.raises(src.SourceUnavailable, match="sudo apt-get install -y trans-de-en"):
        src.apt_install("trans-de-en")


def test_missing_packages_are_named_in_one_line_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root, every missing package of a dataset is named in one sudo line, not one per rerun; as root each
    missing one (and only those) is installed."""
    monkeypatch.setattr(src, "apt_installed", lambda package: package == "git-man")
    installed: list[str] = []
    monkeypatch.setattr(src, "apt_install", lambda *packages: installed.extend(packages))
    monkeypatch.setattr(src.os, "geteuid", lambda: 1000, raising=False)
    with pytest.raises(
        src.SourceUnavailable, match=r"not installed: coreutils, tar; run: sudo apt-get install -y coreutils tar$"
    ):
        src.require_apt_packages(["coreutils", "git-man", "tar"])
    assert installed == []
    monkeypatch.setattr(src.os, "geteuid", lambda: 0, raising=False)
    src.require_apt_packages(["coreutils", "git-man", "tar"])
    assert installed == ["coreutils", "tar"]


# --------------------------------------------------------------------------- runner


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Register fake datasets: 'ok' writes one file, 'broken' fails midway, 'missing' falls back to 'ok'."""
    calls: list[str] = []

    def build_ok(root: Path, opts: prepare_data.Options) -> prepare_data.Counts:
        calls.append("ok")
        return {"fake/train.txt": fmt.write_text(root / "fake" / "train.txt", "a\nb\n")}

    def build_broken(root: Path, opts: prepare_data.Options) -> prepare_data.Counts:
        calls.append("broken")
        fmt.write_text(root / "broken" / "train.txt", "half\n")
        raise src.SourceUnavailable("pip could not install nothing-here")

    def build_missing(root: Path, opts: prepare_data.Options) -> prepare_data.Counts:
        calls.append("missing")
        raise src.SourceUnavailable("apt-get not found")

    registry = {
        "ok": prepare_data.Dataset(build_ok, ("fake",), "fake"),
        "broken": prepare_data.Dataset(build_broken, ("broken",), "fails"),
        "missing": prepare_data.Dataset(build_missing, ("missing",), "falls back", fallback="ok"),
    }
    monkeypatch.setattr(prepare_data, "REGISTRY", registry)
    return calls


def test_prepare_skips_existing_outputs_unless_forced(tmp_path: Path, fake_registry: list[str]) -> None:
    """A second run is a no-op; --force rebuilds."""
    opts = prepare_data.Options()
    assert prepare_data.prepare("ok", tmp_path, opts) == {"fake/train.txt": 2}
    assert prepare_data.prepare("ok", tmp_path, opts) is None
    assert prepare_data.prepare("ok", tmp_path, opts, force=True) == {"fake/train.txt": 2}
    assert fake_registry == ["ok", "ok"]
    assert (tmp_path / "fake" / "train.txt").read_text() == "a\nb\n"


def test_failed_build_leaves_nothing_behind(tmp_path: Path, fake_registry: list[str]) -> None:
    """Outputs are staged, so a builder that fails midway leaves no partial folder or staging dir."""
    with pytest.raises(src.SourceUnavailable):
        prepare_data.prepare("broken", tmp_path, prepare_data.Options())
    assert list(tmp_path.iterdir()) == []


def test_unavailable_source_uses_the_fallback(tmp_path: Path, fake_registry: list[str]) -> None:
    """A dataset with a fallback builds that instead when its source is missing."""
    assert prepare_data.prepare("missing", tmp_path, prepare_data.Options()) == {"fake/train.txt": 2}
    assert fake_registry == ["missing", "ok"]


def test_main_reports_one_line_errors_and_exit_status(
    tmp_path: Path, fake_registry: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A missing source is one ERROR line, other datasets still build, and the exit status is 1."""
    with caplog.at_level(logging.INFO, logger="prepare_data"):
        assert prepare_data.main(["broken", "ok", "--out", str(tmp_path)]) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["broken: pip could not install nothing-here"]
    assert (tmp_path / "fake" / "train.txt").exists()


def test_list_shows_the_names(fake_registry: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """--list prints one dataset per line and builds nothing."""
    assert prepare_data.main(["--list"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["ok", "broken", "missing"]
    assert fake_registry == []


# --------------------------------------------------------------------------- dictionary sentences

FAKE_DING = """# Version :: devel 2023-01-30
Hund {m} | Hunde {pl} :: dog | dogs
der kleine Hund :: the little dog
Wie geht es dir? :: How are you?
wie geht es dir :: how are you
Wie geht es  Dir ? :: How do you do?
Macht geht vor Recht. :: Might is right.
Das ist mir egal. :: I don't care.
Er kommt morgen. :: He is coming tomorrow.
Sie kommt heute. :: She is coming today.
Ich habe Hunger. :: I am hungry.
Ich habe Durst. :: I am thirsty.
Der Hund bellt laut. :: The dog barks loudly.
Dieser Satz hat viel zu viele Wörter für den Test, wirklich sehr viele. :: Too long.
"""


SENTENCE_SPLITS = ("train", "val", "test", "phrases", "words")


def fake_ding_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the builder at a tiny Ding file instead of the trans-de-en package."""
    ding = tmp_path / "de-en"
    ding.write_text(FAKE_DING, encoding="utf-8")
    monkeypatch.setattr(prepare_data, "apt_package_files", lambda package: [ding])
    monkeypatch.setattr(prepare_data, "pick_file", lambda files, *names: files[0])


def read_sources(path: Path) -> list[str]:
    """The source field of every JSONL row."""
    return [json.loads(line)["source"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_dictionary_sentences_keep_held_out_sources_out_of_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No val/test German sentence (case-, punctuation- and space-blind) reaches train, phrases or words."""
    fake_ding_pairs(tmp_path, monkeypatch)
    monkeypatch.setattr(prepare_data, "SENTENCES_HELD_OUT", 3)
    for seed in range(8):
        folder = tmp_path / f"out{seed}"
        prepare_data.build_dictionary_sentences(folder, prepare_data.Options(seed=seed))
        rows = {name: read_sources(folder / f"de_en_sentences/{name}.jsonl") for name in SENTENCE_SPLITS}
        held = rows["val"] + rows["test"]
        kept = rows["train"] + rows["phrases"] + rows["words"]
        assert len(rows["val"]) == len(rows["test"]) == 3
        assert len({fmt.normalise_source(s) for s in held}) == len(held)  # disjoint, no duplicates
        assert not {fmt.normalise_source(s) for s in held} & {fmt.normalise_source(s) for s in kept}
        assert all(fmt.is_sentence(s) and len(s.split()) <= 12 for s in held)
        assert all(fmt.is_sentence(s) for s in rows["train"]) and "Hunde" in rows["words"]


def test_sentence_split_is_seeded_and_loses_only_held_out_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same seed, same split; every parsed pair lands in one part unless it duplicates a held-out source."""
    fake_ding_pairs(tmp_path, monkeypatch)
    pairs = list(prepare_data.read_ding_pairs()[1].items())
    split = fmt.split_sentence_pairs(pairs, held_out=2, max_words=12, seed=5)
    assert split == fmt.split_sentence_pairs(pairs, held_out=2, max_words=12, seed=5)
    assert any(split != fmt.split_sentence_pairs(pairs, 2, 12, seed) for seed in range(6, 12))
    placed = {row["source"] for rows in split.values() for row in rows}
    held = {fmt.normalise_source(row["source"]) for name in ("val", "test") for row in split[name]}
    assert {s for s, _ in pairs if s not in placed} <= {s for s, _ in pairs if fmt.normalise_source(s) in held}


def test_message_pairs_keep_translated_one_line_singular_messages() -> None:
    """Context and plural forms other than the first are dropped, as are untranslated and multi-line messages."""
    catalog = {
        "": "Content-Type: text/plain; charset=UTF-8\n",
        "cannot open %s": "kann %s nicht öffnen",
        "menu\x04Open  file": "Datei  öffnen",
        ("%d file removed", 0): "%d Datei entfernt",
        ("%d file removed", 1): "%d Dateien entfernt",
        "Boro": "Boro",
        "usage: a\n  b": "Aufruf: a\n  b",
        "untranslated": "",
        " ".join(["word"] * 31): " ".join(["Wort"] * 31),
    }
    assert sorted(fmt.message_pairs(catalog)) == [
        ("%d Datei entfernt", "%d file removed"),
        ("Datei öffnen", "Open file"),
        ("kann %s nicht öffnen", "cannot open %s"),
    ]


def write_mo(path: Path, messages: dict[str, str], encoding: str = "utf-8", charset: str | None = None) -> Path:
    """A minimal compiled gettext catalog (little-endian, no hash table) holding `messages` in `encoding`, its
    header declaring `charset` (the encoding unless given)."""
    header = {"": f"Content-Type: text/plain; charset={charset or encoding}\n"}
    items = sorted({**header, **messages}.items())
    ids, strs = [k.encode(encoding) for k, _ in items], [v.encode(encoding) for _, v in items]
    start = 28 + 16 * len(items)
    table, blob = [], b""
    for chunk in ids + strs:
        table.append((len(chunk), start + len(blob)))
        blob += chunk + b"\0"
    head = struct.pack("<7I", 0x950412DE, 0, len(items), 28, 28 + 8 * len(items), 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + b"".join(struct.pack("<2I", *entry) for entry in table) + blob)
    return path


def test_software_messages_read_german_catalogs_and_skip_unreadable_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Only de/LC_MESSAGES catalogs are read (fr/ ones for software_messages_fr); a catalog in a legacy encoding is
    skipped with a warning naming it."""
    german = {f"cannot open file {i}": f"Kann Datei {i} nicht öffnen" for i in range(10)}
    french = {f"cannot open file {i}": f"impossible d'ouvrir le fichier {i}" for i in range(10)}
    files = [
        write_mo(tmp_path / "de/LC_MESSAGES/tool.mo", german),
        write_mo(tmp_path / "fr/LC_MESSAGES/tool.mo", french),
        write_mo(tmp_path / "de/LC_MESSAGES/old.mo", {"open": "öffnen"}, encoding="latin-1", charset="utf-8"),
    ]
    monkeypatch.setattr(prepare_data, "apt_packages_files", lambda packages: dict.fromkeys(packages, files))
    monkeypatch.setattr(prepare_data, "MESSAGES_HELD_OUT", 2)
    prepare_data.build_software_messages(tmp_path / "out", prepare_data.Options(seed=0))
    rows = {name: read_sources(tmp_path / f"out/de_en_messages/{name}.jsonl") for name in ("train", "val", "test")}
    assert sorted(rows["train"] + rows["val"] + rows["test"]) == sorted(german.values())
    assert len(rows["val"]) == len(rows["test"]) == 2
    assert "old.mo" in caplog.text and "UTF-8" in caplog.text
    prepare_data.build_software_messages_fr(tmp_path / "out", prepare_data.Options(seed=0))
    rows = [read_sources(tmp_path / f"out/fr_en_messages/{name}.jsonl") for name in ("train", "val", "test")]
    assert sorted(sum(rows, [])) == sorted(french.values())


def test_message_split_holds_out_sentences_only_and_trains_on_the_rest() -> None:
    """Held-out messages have 3+ source words, none shares a normalised source with train, nothing else is lost."""
    pairs = [(f"Kann Datei {i} nicht öffnen", f"cannot open file {i}") for i in range(20)]
    pairs += [("kann datei 3 nicht öffnen!", "cannot open file 3!"), ("Datei", "file"), ("Öffnen", "open")]
    for seed in range(8):
        split = fmt.split_message_pairs(pairs, held_out=3, min_words=3, seed=seed)
        held = {fmt.normalise_source(r["source"]) for name in ("val", "test") for r in split[name]}
        train = {r["source"] for r in split["train"]}
        assert len(split["val"]) == len(split["test"]) == 3 and len(held) == 6
        assert all(len(r["source"].split()) >= 3 for name in ("val", "test") for r in split[name])
        assert not held & {fmt.normalise_source(s) for s in train}
        assert train == {s for s, _ in pairs if fmt.normalise_source(s) not in held}


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV that prepare_data wrote."""
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
    monkeypatch.setattr(prepare_data, "orange_rows", lambda name: [{"text": t, "label": "x"} for t in tables[name]])
    prepare_data.build_news_text(tmp_path, prepare_data.Options(seed=0))
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
    monkeypatch.setattr(prepare_data, "orange_rows", lambda name: tables[name])
    counts = prepare_data.build_newsgroups(tmp_path, prepare_data.Options(seed=0))
    assert set(counts) == {f"newsgroups/{s}.csv" for s in ("train", "val", "test")}
    splits = {split: read_csv_rows(tmp_path / f"newsgroups/{split}.csv") for split in ("train", "val", "test")}
    assert [row["text"] for row in splits["test"]] == ["later post"]
    assert sorted(row["label"] for row in splits["val"]) == ["a"] * 5 + ["b"] * 5
    texts = [row["text"] for split in ("train", "val") for row in splits[split]]
    assert len(texts) == len(set(texts)) == 100
