"""Translation demo data from Debian packages: the Ding German-English dictionary (pairs and example sentences)
and program messages from gettext catalogs (German and French against their English originals)."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

from tetraformer.demo_data.formats import (
    message_pairs,
    parse_ding_line,
    read_mo,
    split_items,
    split_message_pairs,
    split_sentence_pairs,
    write_jsonl,
)
from tetraformer.demo_data.options import Counts, Options, cap
from tetraformer.demo_data.sources import apt_package_files, apt_packages_files, pick_file

log = logging.getLogger(__name__)


def read_ding_pairs() -> tuple[Path, dict[str, str]]:
    """The Ding file (Debian trans-de-en) and its pairs, one target per German term: its first sense."""
    path = pick_file(apt_package_files("trans-de-en"), "trans/de-en", "trans-de-en")
    pairs: dict[str, str] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            for source, target in parse_ding_line(line):
                pairs.setdefault(source, target)
    return path, pairs


def build_dictionary(root: Path, opts: Options) -> Counts:
    """Ding de-en (Debian trans-de-en) -> de_en/{train,val,test}.jsonl of {source, target} pairs (90/5/5)."""
    path, pairs = read_ding_pairs()
    rows = [{"source": source, "target": target} for source, target in pairs.items()]
    log.info("dictionary: %d clean pairs parsed from %s", len(rows), path)
    limit = cap(opts.limit, 50_000)
    rows = random.Random(opts.seed).sample(rows, min(limit or len(rows), len(rows)))
    parts = dict(zip(("train", "val", "test"), split_items(rows, [0.9, 0.05, 0.05], opts.seed), strict=True))
    return {f"de_en/{s}.jsonl": write_jsonl(root / f"de_en/{s}.jsonl", part) for s, part in parts.items()}


SENTENCES_HELD_OUT = 1000  # val and test sentences each


def build_dictionary_sentences(root: Path, opts: Options) -> Counts:
    """Ding example sentences -> de_en_sentences/{train,val,test}.jsonl; its other pairs -> {phrases,words}.jsonl.

    Val and test hold SENTENCES_HELD_OUT short sentences each (at most 12 German words); train holds the
    remaining sentences; phrases.jsonl (several words) and words.jsonl (one word) hold the dictionary's other
    pairs, for mixing in. No held-out German sentence (compared case-, punctuation- and space-blind) is in them.
    """
    path, pairs = read_ding_pairs()
    parts = split_sentence_pairs(list(pairs.items()), SENTENCES_HELD_OUT, max_words=12, seed=opts.seed)
    log.info("dictionary_sentences: %s from %s", ", ".join(f"{len(v)} {k}" for k, v in parts.items()), path)
    return {f"de_en_sentences/{s}.jsonl": write_jsonl(root / f"de_en_sentences/{s}.jsonl", p) for s, p in parts.items()}


MESSAGES_HELD_OUT = 1000  # val and test messages each
MESSAGE_MIN_WORDS = 3  # a held-out message has at least this many German words (no bare names or menu words)
MESSAGE_PACKAGES = (  # Debian packages whose German catalogs (*/de/LC_MESSAGES/*.mo) hold program messages
    "git",
    "coreutils",
    "gnupg-l10n",
    "libc-l10n",
    "dpkg",
    "libdpkg-perl",
    "gettext",
    "binutils-common",
    "wget",
    "procps",
    "tar",
    "login",
    "bash",
    "make",
    "apt",
    "man-db",
    "diffutils",
    "findutils",
    "xz-utils",
    "sed",
    "grep",
    "adduser",
    "psmisc",
    "krb5-locales",
    "libglib2.0-data",
    "libgtk2.0-common",
    "shared-mime-info",
    "iso-codes",
)


def read_catalog(path: Path) -> dict[Any, str]:
    """A .mo catalog's messages, or none (with a warning naming it) when it is not a UTF-8 gettext catalog."""
    try:
        return read_mo(path)
    except (OSError, UnicodeDecodeError) as err:
        log.warning("skipping %s: not a readable UTF-8 gettext catalog (%s)", path, err)
        return {}


def build_software_messages(root: Path, opts: Options) -> Counts:
    """German program messages and their English originals from Debian's gettext catalogs ->
    de_en_messages/{train,val,test}.jsonl; val and test hold MESSAGES_HELD_OUT messages each, none in train."""
    return build_catalog_pairs(root, opts, "de")


def build_software_messages_fr(root: Path, opts: Options) -> Counts:
    """The same catalogs' French messages -> fr_en_messages/{train,val,test}.jsonl: data no shipped setting was
    chosen on, for trying the de->en configs as a user would."""
    return build_catalog_pairs(root, opts, "fr")


def build_catalog_pairs(root: Path, opts: Options, language: str) -> Counts:
    """One language's messages (*/<language>/LC_MESSAGES/*.mo of MESSAGE_PACKAGES) and their English originals ->
    <language>_en_messages/{train,val,test}.jsonl, split by `split_message_pairs`."""
    pairs: dict[str, str] = {}
    for files in apt_packages_files(MESSAGE_PACKAGES).values():  # without root: one error naming every missing one
        for path in sorted(files):
            if path.suffix == ".mo" and path.parent.match(f"{language}/LC_MESSAGES"):
                for source, target in message_pairs(read_catalog(path)):
                    pairs.setdefault(source, target)
    parts = split_message_pairs(list(pairs.items()), MESSAGES_HELD_OUT, MESSAGE_MIN_WORDS, opts.seed)
    folder = f"{language}_en_messages"
    log.info("%s: %s", folder, ", ".join(f"{len(v)} {k}" for k, v in parts.items()))
    return {f"{folder}/{s}.jsonl": write_jsonl(root / f"{folder}/{s}.jsonl", p) for s, p in parts.items()}
