"""tetraformer.demo_data.translation on a tiny Ding file and handmade gettext catalogs: held-out splits stay out."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tetraformer.demo_data import formats as fmt
from tetraformer.demo_data import translation
from tetraformer.demo_data.options import Options

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
    monkeypatch.setattr(translation, "apt_package_files", lambda package: [ding])
    monkeypatch.setattr(translation, "pick_file", lambda files, *names: files[0])


def read_sources(path: Path) -> list[str]:
    """The source field of every JSONL row."""
    return [json.loads(line)["source"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_dictionary_sentences_keep_held_out_sources_out_of_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No val/test German sentence (case-, punctuation- and space-blind) reaches train, phrases or words."""
    fake_ding_pairs(tmp_path, monkeypatch)
    monkeypatch.setattr(translation, "SENTENCES_HELD_OUT", 3)
    for seed in range(8):
        folder = tmp_path / f"out{seed}"
        translation.build_dictionary_sentences(folder, Options(seed=seed))
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
    pairs = list(translation.read_ding_pairs()[1].items())
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
    monkeypatch.setattr(translation, "apt_packages_files", lambda packages: dict.fromkeys(packages, files))
    monkeypatch.setattr(translation, "MESSAGES_HELD_OUT", 2)
    translation.build_software_messages(tmp_path / "out", Options(seed=0))
    rows = {name: read_sources(tmp_path / f"out/de_en_messages/{name}.jsonl") for name in ("train", "val", "test")}
    assert sorted(rows["train"] + rows["val"] + rows["test"]) == sorted(german.values())
    assert len(rows["val"]) == len(rows["test"]) == 2
    assert "old.mo" in caplog.text and "UTF-8" in caplog.text
    translation.build_software_messages_fr(tmp_path / "out", Options(seed=0))
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
