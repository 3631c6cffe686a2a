"""Japanese prose from Debian's Japanese documentation packages (manual pages, HTML guides and help) as sentences,
one document per source file, split into morphemes as the NER corpus is: the unlabelled text for masked-LM
pretraining before the Japanese NER tagger."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Protocol

from tetraformer.demo_data.formats import PARAGRAPH_BREAK
from tetraformer.demo_data.sources import pip_package_dir

JAPANESE_DOC_PACKAGES = (  # Debian packages of Japanese manuals and guides (about 12 MB of sentences together)
    "manpages-ja",
    "manpages-ja-dev",
    "debian-reference-ja",
    "developers-reference-ja",
    "maint-guide-ja",
    "debian-policy-ja",
    "debian-faq-ja",
    "aptitude-doc-ja",
    "libreoffice-help-ja",
    "gimp-help-ja",
)
JAPANESE_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uff66-\uff9f]")  # kana, kanji, half-width kana
WIDE_CHAR = r"[\u3000-\u30ff\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]"  # Japanese characters and full-width punctuation
SENTENCE_END = re.compile(r"(?<=[。！？])")
MIN_SENTENCE_CHARS, MAX_SENTENCE_CHARS = 8, 200
MIN_JAPANESE_SHARE = 0.5  # a sentence is at least half kana and kanji (not a code listing with a Japanese word)

BLOCK_TAGS = frozenset(
    ("p", "br", "div", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "td", "th", "pre", "title")
    + ("dt", "dd", "table", "blockquote", "section", "caption")
)
SKIPPED_TAGS = frozenset(("script", "style"))


class _HtmlText(HTMLParser):
    """Collects an HTML page's text, a paragraph break at each block element, nothing from scripts or styles."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Open a skipped element or break the paragraph."""
        if tag in SKIPPED_TAGS:
            self.skipping += 1
        elif tag in BLOCK_TAGS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        """Close a skipped element or break the paragraph."""
        if tag in SKIPPED_TAGS:
            self.skipping = max(0, self.skipping - 1)
        elif tag in BLOCK_TAGS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        """Keep text outside scripts and styles."""
        if not self.skipping:
            self.parts.append(data)


def html_text(page: str) -> str:
    """An HTML page's visible text, paragraphs separated by blank lines."""
    parser = _HtmlText()
    parser.feed(page)
    parser.close()
    return "".join(parser.parts)


ROFF_FONT_MACROS = frozenset(("B", "I", "BR", "IR", "RB", "RI", "BI", "IB", "SM", "SB"))  # arguments: running text
ROFF_ESCAPE = re.compile(r"\\f(?:\(..|\[[^\]]*\]|.)|\\\(..|\\\[[^\]]*\]|\\s[+-]?\d+|\\[&|^%:c]")


def roff_text(source: str) -> str:
    """A manual page's (man macros) text: font macros kept as text, other requests break the paragraph."""
    lines = []
    for line in source.splitlines():
        if line.startswith((".", "'")):
            name, _, args = line[1:].strip().partition(" ")
            lines.append(args.replace('"', "") if name in ROFF_FONT_MACROS else "\n")
        else:
            lines.append(line)
    text = "\n".join(lines).replace("\\-", "-").replace("\\e", "\\").replace("\\ ", " ")
    return ROFF_ESCAPE.sub("", text)


def join_lines(paragraph: str) -> str:
    """One line: space or a break between two Japanese characters or full-width marks disappears (Japanese is
    written without spaces), other runs of space become one."""
    joined = re.sub(rf"(?<={WIDE_CHAR})\s+(?={WIDE_CHAR})", "", paragraph)
    return " ".join(joined.split())


def japanese_sentences(text: str) -> Iterator[str]:
    """Sentences of `text` (paragraphs split at 。！？) of 8-200 characters, at least half of them Japanese."""
    for paragraph in PARAGRAPH_BREAK.split(text):
        for sentence in SENTENCE_END.split(join_lines(paragraph)):
            sentence = sentence.strip()
            if not MIN_SENTENCE_CHARS <= len(sentence) <= MAX_SENTENCE_CHARS:
                continue
            if len(JAPANESE_CHAR.findall(sentence)) >= MIN_JAPANESE_SHARE * len(sentence):
                yield sentence


def document_text(path: Path) -> str | None:
    """The text of a manual page (`man/.../*.gz`) or an HTML page (`*.html`, `*.html.gz`); None for other files."""
    name = path.name
    is_html = name.endswith((".html", ".htm", ".html.gz", ".xhtml"))
    is_man = "/man/" in path.as_posix() and name.endswith(".gz") and not is_html
    if not (is_html or is_man):
        return None
    raw = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    text = raw.decode("utf-8", errors="replace")
    return html_text(text) if is_html else roff_text(text)


def japanese_documents(files: Iterable[Path], exclude: set[str]) -> list[list[str]]:
    """One document (its new sentences, in order) per file that has any; a sentence seen before or in
    `exclude` is dropped, so each sentence appears once in the whole corpus."""
    seen = set(exclude)
    documents = []
    for path in files:
        text = document_text(path)
        if text is None:
            continue
        sentences = [s for s in dict.fromkeys(japanese_sentences(text)) if s not in seen]
        seen.update(sentences)
        if sentences:
            documents.append(sentences)
    return documents


class Segmenter(Protocol):
    """A morphological analyser's word splitter (janome's Tokenizer(wakati=True))."""

    def tokenize(self, text: str) -> Iterable[str]:
        """The morphemes of `text`, in order."""
        ...


def janome_segmenter() -> Segmenter:
    """janome's word splitter on its IPA dictionary (pip-installed on first use), the split of ner_ja's corpus."""
    pip_package_dir("janome", "janome")
    from janome.tokenizer import Tokenizer

    return Tokenizer(wakati=True)


def morphemes(sentence: str, segmenter: Segmenter) -> str:
    """A sentence as its morphemes separated by single spaces (the NER corpus' tokens, as text)."""
    return " ".join(word for word in segmenter.tokenize(sentence) if word.strip())
