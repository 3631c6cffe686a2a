"""Readers for tagged sentences: CoNLL columns and JSONL tokens/tags, with file:line errors; raw text to words."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tetraformer.data.errors import DataError, check_choice
from tetraformer.data.files import FileSpec, resolve_files
from tetraformer.data.hf_sources import check_columns, is_table_file
from tetraformer.data.lines import iter_lines
from tetraformer.data.records import iter_records
from tetraformer.data.tag_schemes import looks_like_tag

SentenceFormat = Literal["conll", "jsonl", "text"]  # text: raw lines split into words (prediction input)
WordSplit = Literal["whitespace", "char"]  # char: every non-space character a word (no spaces between words)
SUFFIX_FORMATS: dict[str, SentenceFormat] = {
    ".conll": "conll",
    ".txt": "conll",
    ".tsv": "conll",
    ".bio": "conll",
    ".iob": "conll",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
}
DOCSTART = "-DOCSTART-"


@dataclass
class TaggedSentence:
    """One sentence: its words, their tags (None when unlabelled), where it starts, and its other fields."""

    tokens: list[str]
    tags: list[str] | None
    source: str
    line: int
    fields: dict[str, Any] = field(default_factory=dict)  # the input's own fields, kept by predict
    per_line: bool = False  # one word per line from `line` on (CoNLL), else all on `line` (JSONL, text)
    document: int = 0  # the document within its file: CoNLL counts `-DOCSTART-` lines, other formats have one

    @property
    def where(self) -> tuple[str, int]:
        """(file, first line) for errors."""
        return self.source, self.line

    def line_of(self, word: int) -> int:
        """The line that holds a word."""
        return self.line + word if self.per_line else self.line


TagCheck = Callable[[str], str | None]  # a tag -> why it is not allowed, or None


def sentence_format(path: str | Path, format: SentenceFormat | None = None) -> SentenceFormat:  # noqa: A002
    """The given format, else the one the suffix implies (.conll/.txt/.tsv/.bio: CoNLL, .jsonl/.json: JSONL); a
    Parquet/Arrow table is read as records (like JSONL) whatever the format."""
    if is_table_file(path):
        return "jsonl"
    if format is not None:
        check_choice("sentence format", format, SentenceFormat)
        return format
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIX_FORMATS:
        raise DataError(
            f"cannot tell the format from suffix {suffix!r} (known: {', '.join(SUFFIX_FORMATS)}); "
            "set --data.format conll, jsonl or text",
            path,
        )
    return SUFFIX_FORMATS[suffix]


def read_sentences(
    files: FileSpec,
    format: SentenceFormat | None = None,  # noqa: A002 - None: from each file's suffix
    labelled: bool = True,
    check_tag: TagCheck | None = None,
    encoding: str = "utf-8",
    tokens_field: str = "tokens",
    tags_field: str = "tags",
    text_field: str = "text",
    word_split: WordSplit = "whitespace",
) -> list[TaggedSentence]:
    """Every sentence of the files; `labelled` requires tags, `check_tag` vets each tag at its line."""
    sentences: list[TaggedSentence] = []
    fields = (tokens_field, tags_field, text_field)
    for path in resolve_files(files):
        found = list(
            file_sentences(path, sentence_format(path, format), labelled, check_tag, encoding, fields, word_split)
        )
        if not found:
            raise DataError("file has no sentences", path)
        sentences += found
    return sentences


def file_sentences(
    path: str | Path,
    fmt: SentenceFormat,
    labelled: bool = True,
    check_tag: TagCheck | None = None,
    encoding: str = "utf-8",
    fields: tuple[str, str, str] = ("tokens", "tags", "text"),  # a JSONL row's tokens, tags and raw-text fields
    word_split: WordSplit = "whitespace",
) -> Iterator[TaggedSentence]:
    """One file's sentences in `fmt`, one at a time (`read_sentences` lists them)."""
    if fmt == "conll":
        return read_conll(path, labelled, check_tag, encoding)
    if fmt == "jsonl":
        return read_jsonl(path, labelled, check_tag, encoding, *fields, word_split)
    if labelled:
        raise DataError("raw text has no tags: it can only be predicted (use CoNLL or JSONL)", path)
    return read_text_lines(path, encoding, word_split)


def read_conll(
    path: str | Path, labelled: bool = True, check_tag: TagCheck | None = None, encoding: str = "utf-8"
) -> Iterator[TaggedSentence]:
    """Sentences of a CoNLL file: token first, tag last, columns split on tabs (else on spaces).

    Blank lines end sentences; `-DOCSTART-` lines are skipped; CRLF endings are fine. Unlabelled reading
    (prediction) takes one-column lines as bare tokens, and refuses a line of space-separated words whose last is
    no tag: a sentence per line, which CoNLL would read as its first word only.
    """
    tokens: list[str] = []
    tags: list[str | None] = []
    start = document = 0
    for number, raw in iter_lines(path, encoding):
        line = raw.rstrip("\r\n")
        columns = [c.strip() for c in line.split("\t")] if "\t" in line else line.split()
        columns = [c for c in columns if c]
        if not columns or columns[0] == DOCSTART:
            if tokens:
                yield _conll_sentence(tokens, tags, path, start, document)
            tokens, tags = [], []
            document += bool(columns)
            continue
        if len(columns) == 1 and labelled:
            raise DataError(
                f"line has one column {columns[0]!r}: a token and its tag need two, separated by a tab or spaces",
                path,
                number,
            )
        tag = columns[-1] if len(columns) > 1 else None
        if tag is not None and not labelled and "\t" not in line and not looks_like_tag(tag):
            raise _sentence_line_error(line, tag, path, number)
        if tag is not None and check_tag is not None:
            _check(tag, check_tag, path, number)
        start = start if tokens else number
        tokens.append(columns[0])
        tags.append(tag)
    if tokens:
        yield _conll_sentence(tokens, tags, path, start, document)


def _sentence_line_error(line: str, last: str, path: str | Path, number: int) -> DataError:
    """A line that reads as a sentence, not as a CoNLL token and its tag: name it and the text format."""
    shown = line.strip() if len(line.strip()) <= 40 else line.strip()[:40] + "..."
    return DataError(
        f"line {shown!r} ends in {last!r}, which is no tag: a CoNLL file has one token per line (its tag last) "
        "and a blank line after each sentence; for one sentence per line, set --data.format text",
        path,
        number,
    )


def _conll_sentence(
    tokens: list[str], tags: list[str | None], path: str | Path, line: int, document: int
) -> TaggedSentence:
    """A CoNLL sentence; its tags only when every token has one."""
    known = None if any(t is None for t in tags) else [str(t) for t in tags]
    return TaggedSentence(tokens, known, str(path), line, {"tokens": tokens}, per_line=True, document=document)


def read_jsonl(
    path: str | Path,
    labelled: bool = True,
    check_tag: TagCheck | None = None,
    encoding: str = "utf-8",
    tokens_field: str = "tokens",
    tags_field: str = "tags",
    text_field: str = "text",
    word_split: WordSplit = "whitespace",
) -> Iterator[TaggedSentence]:
    """Sentences of JSON lines `{tokens: [...], tags: [...]}` (or table rows); unlabelled ones may give raw `text`."""
    if labelled and is_table_file(path):
        check_columns(path, [tokens_field, tags_field], " (set --data.tokens_field and --data.tags_field)")
    for record in iter_records(path, "json", encoding=encoding):  # JSON lines, or one JSON array
        data, where = record.data, (record.source, record.line)
        if tokens_field in data:
            tokens = _string_list(data[tokens_field], tokens_field, where)
        elif not labelled and text_field in data:
            tokens = _text_words(data[text_field], text_field, word_split, where)
        else:
            wanted = repr(tokens_field) + ("" if labelled else f" or {text_field!r}")
            raise DataError(f"missing field {wanted} (keys present: {', '.join(map(repr, data))})", *where)
        if not tokens:
            raise DataError(f"field {tokens_field!r} is an empty list", *where)
        tags = None
        if labelled:
            if tags_field not in data:
                raise DataError(f"missing field {tags_field!r} (keys present: {', '.join(map(repr, data))})", *where)
            tags = _string_list(data[tags_field], tags_field, where)
            if len(tags) != len(tokens):
                raise DataError(f"sentence has {len(tokens)} tokens but {len(tags)} tags", *where)
            for tag in tags if check_tag is not None else ():
                _check(tag, check_tag, *where)
        yield TaggedSentence(tokens, tags, *where, dict(data))


def read_text_lines(
    path: str | Path, encoding: str = "utf-8", word_split: WordSplit = "whitespace"
) -> Iterator[TaggedSentence]:
    """One unlabelled sentence per non-blank line of raw text, split into words."""
    for number, raw in iter_lines(path, encoding):
        text = raw.rstrip("\r\n")
        if text.strip():
            yield TaggedSentence(split_words(text, word_split), None, str(path), number, {"text": text})


def split_words(text: str, word_split: WordSplit = "whitespace") -> list[str]:
    """Words of raw text: whitespace-separated, or every non-space character (languages without spaces)."""
    check_choice("word split", word_split, WordSplit)
    return text.split() if word_split == "whitespace" else [ch for ch in text if not ch.isspace()]


def join_words(words: list[str], word_split: WordSplit = "whitespace") -> str:
    """The text of consecutive words: spaces between them, or none for character-split text."""
    return ("" if word_split == "char" else " ").join(words)


def _text_words(value: Any, name: str, word_split: WordSplit, where: tuple[str, int]) -> list[str]:
    """The words of a record's raw text field."""
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"field {name!r} must be a non-empty string, got {value!r}", *where)
    return split_words(value, word_split)


def _string_list(value: Any, name: str, where: tuple[str, int]) -> list[str]:
    """A record field that must be a list of non-empty strings."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise DataError(f"field {name!r} must be a list of non-empty strings, got {value!r}"[:200], *where)
    return list(value)


def _check(tag: str, check_tag: TagCheck, path: str | Path, line: int) -> None:
    """A DataError at the line when the tag is not allowed."""
    problem = check_tag(tag)
    if problem is not None:
        raise DataError(problem, path, line)
