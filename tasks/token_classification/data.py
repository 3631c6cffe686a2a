"""LightningDataModule for token classification: tagged sentences -> overlapping subword windows -> batches."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, MutableMapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
from torch.utils.data import DataLoader

from tasks.token_classification.made_up import made_up_copies
from tasks.token_classification.mentions import replaced_copies
from tasks.token_classification.windows import (
    SentenceFields,
    SentenceWindows,
    WindowLabels,
    neighbour_words,
    sentence_table,
)
from tetraformer.data import DataError, LabelVocabulary
from tetraformer.data.collate import IGNORE_INDEX, PaddingCollator
from tetraformer.data.conll import SentenceFormat, TaggedSentence, WordSplit, join_words, read_sentences
from tetraformer.data.label_columns import LabelColumn
from tetraformer.data.spec import DataSpec
from tetraformer.data.splits import train_val_split
from tetraformer.data.store import ROWS, Store, Tables, tokenize_rows
from tetraformer.data.store_rows import StoreRows
from tetraformer.data.tag_schemes import PREFIXES, canonical_scheme, split_tag, tag_problem, to_canonical
from tetraformer.data.word_alignment import SentenceBatches
from tetraformer.errors import require
from tetraformer.training.base.labelled import LabelledData
from tetraformer.training.base.text_datamodule import TextDataModule

log = logging.getLogger(__name__)
Row = dict[str, Any]  # one window: input_ids, word_labels, labels, word_index, sentence (+ record, words)
TagScheme = Literal["IOB1", "IOB2", "BIOES", "IO"]
WORDS_FILE = "train_words.txt"  # the training sentences as text, what the run's tokenizer is trained on
SENTENCES = "sentences"  # the store's table of sentences as read (tags, fields, words, file and line)


class TokenClassificationData(LabelledData, TextDataModule):
    """CoNLL or JSONL tagged sentences (raw text too, to predict); each sentence cut into windows of subwords.

    Tags are checked against `tag_scheme` and kept in its canonical form (IOB1 becomes IOB2). The tag
    vocabulary is every tag of the scheme for each entity type the training data has (or `labels`); a
    checkpoint's vocabulary wins when the CLI gives its spec (`use_spec`). Batches hold whole sentences
    (`batch_size` sentences, all their windows). With `context`, a sentence that fits one window also reads up to
    that many subwords of the text before and after it in its file and document (CoNLL `-DOCSTART-` lines start
    one), unlabelled: document context for tagging. With `mention_copies` K, the training split also holds K copies
    of its sentences in which each entity is swapped, with `mention_replace_prob`, for a random training entity of
    its type (mention replacement). The words of `vocab_paths` (unlabelled files, read as text to predict is) train
    the run's tokenizer beside the training words, so they get pieces of their own. Each split's sentences (tags as
    read) and windows live in a row store, built once and reused by later runs. The TextDataModule options (paths,
    text_field for raw text to predict, encoding, tokenizer_type, vocab_size, tokenizer, cache_dir, num_proc,
    batch_size, ...) pass through `**kwargs`.
    """

    store_name = "token_classification"
    token_columns = ("input_ids",)

    def __init__(
        self,
        format: SentenceFormat | None = None,  # noqa: A002 - None: from each file's suffix
        tag_scheme: TagScheme = "IOB2",
        tokens_field: str = "tokens",
        tags_field: str = "tags",
        word_split: WordSplit = "whitespace",
        labels: list[str] | None = None,
        label_all_subwords: bool = False,
        max_length: int = 128,
        stride: int = 32,
        context: int = 0,
        mention_copies: int = 0,
        mention_replace_prob: float = 0.5,
        made_up_copies: int = 0,
        made_up_prob: float = 0.5,
        bucket: bool = False,
        vocab_paths: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        require(self, "max_length", max_length, max_length >= 3, "must be 3 or more ([CLS] word [SEP])")
        require(self, "stride", stride, 0 <= stride < max_length, f"must be 0 or more and less than {max_length=}")
        require(self, "context", context, context >= 0, "must be 0 or more (subwords read on each side)")
        require(self, "mention_copies", mention_copies, mention_copies >= 0, "must be 0 or more")
        require(self, "mention_replace_prob", mention_replace_prob, 0 < mention_replace_prob <= 1, "must be in (0, 1]")
        require(self, "made_up_copies", made_up_copies, made_up_copies >= 0, "must be 0 or more")
        require(self, "made_up_prob", made_up_prob, 0 < made_up_prob <= 1, "must be in (0, 1]")
        self.save_hyperparameters()
        canonical_scheme(tag_scheme)  # an unknown scheme fails here, naming the known ones
        self.format, self.tag_scheme, self.word_split = format, tag_scheme, word_split
        self.fields = {"tokens_field": tokens_field, "tags_field": tags_field, "text_field": self.text_field}
        self.fixed_labels, self.label_all_subwords = labels, label_all_subwords
        self.max_length, self.stride, self.context, self.bucket = max_length, stride, context, bucket
        self.mention_copies, self.mention_replace_prob = mention_copies, mention_replace_prob
        self.made_up_copies, self.made_up_prob = made_up_copies, made_up_prob
        self.vocab_paths = list(vocab_paths or [])
        self.vocabulary: LabelVocabulary | None = None
        self.sentences: dict[str, StoreRows] = {}  # by split: its sentences' rows in the store's `sentences` table

    @property
    def scheme(self) -> str:
        """The scheme the tags are kept in (IOB2 for IOB1 data)."""
        return canonical_scheme(self.tag_scheme)

    def sequence_length(self) -> tuple[str, int]:
        """The longest window a batch holds, and the option that sets it."""
        return "--data.max_length", self.max_length

    # --- tokenizer and stores -----------------------------------------------------------------------
    def prepare_data(self) -> None:
        """Train the run's tokenizer on the training words (and those of `vocab_paths`) unless one is configured or
        init_from brings one; build the stage's row stores."""
        given = self.tokenizer_path or self.init_from
        if given and self.vocab_paths and self.trainer_stage() == "fit":
            log.warning(
                "--data.vocab_paths is not used: it trains the run's own tokenizer, and this run's tokenizer is "
                "given (--data.tokenizer or --model.init_from) and used as it is"
            )
        if not given:
            sentences = self.read(self.require("train"))
            sentences += [s for path in self.vocab_paths for s in self.read(path, labelled=False)]
            words = "".join(join_words(s.tokens, self.word_split) + "\n" for s in sentences)
            self.train_run_tokenizer_on(self.run_dir() / "tokenizer_data" / WORDS_FILE, words)
        self.prepare_stores()

    def row_options(self, split: str) -> dict[str, Any]:
        """What changes a split's windows: how sentences are read and tags checked, how windows are cut."""
        return {
            "format": self.format,
            "encoding": self.encoding,
            **self.fields,
            "word_split": self.word_split,
            "tag_scheme": self.tag_scheme,
            "max_length": self.max_length,
            "stride": self.stride,
            "context": self.context,
            "label_all_subwords": self.label_all_subwords,
            "labelled": split != "predict",
            **(self.copy_options() if split == "train" else {}),
        }

    def copy_options(self) -> dict[str, Any]:
        """What makes the training split's mention-replaced and made-up-word copies (none without either)."""
        options: dict[str, Any] = {}
        if self.mention_copies:
            options |= {"mention_copies": self.mention_copies, "mention_replace_prob": self.mention_replace_prob}
        if self.made_up_copies:
            options |= {"made_up_copies": self.made_up_copies, "made_up_prob": self.made_up_prob}
        return options | {"seed": self.seed} if options else {}

    def build_rows(self, split: str, path: str, scratch: Path) -> Tables:
        """The sentences of a split's files (`sentences`) and their windows (`rows`, SentenceWindows)."""
        from datasets import Dataset

        labelled = split != "predict"
        sentences = self.read(path, labelled)
        if split == "train" and (self.mention_copies or self.made_up_copies):
            sentences += self.training_copies(sentences)
        columns = {"tokens": [s.tokens for s in sentences], "sentence": range(len(sentences))}
        if self.context:  # words before and after each sentence; at least one subword each, so enough to cut from
            columns["before"], columns["after"] = neighbour_words(sentences, self.context)
        numbered = Dataset.from_dict(columns)
        encode = SentenceWindows(
            self.tokenizer, self.max_length, self.stride, self.label_all_subwords, labelled, self.context
        )
        windows = tokenize_rows(numbered, encode, scratch, self.num_proc, f"tokenizing {split} sentences")
        return {SENTENCES: sentence_table(sentences, labelled), ROWS: windows}

    def training_copies(self, sentences: list[TaggedSentence]) -> list[TaggedSentence]:
        """The training sentences' mention-replaced copies, then their made-up-word copies (documents -1, -2, ...)."""
        copies = replaced_copies(sentences, self.scheme, self.mention_copies, self.mention_replace_prob, self.seed)
        made_up = made_up_copies(sentences, self.made_up_copies, self.made_up_prob, self.seed, self.mention_copies)
        log.info(
            "training on %d sentences, %d mention-replaced and %d made-up-word copies",
            len(sentences),
            len(copies),
            len(made_up),
        )
        return copies + made_up

    # --- splits --------------------------------------------------------------------------------------
    def read_splits(self, stage: str, store: MutableMapping[str, Any], read: Callable[[str, bool], Any]) -> None:
        """The platform's splits; but with copies and no `val_path`, the validation share is held out of the
        training file's own sentences, and training keeps none of their copies."""
        copies = self.mention_copies + self.made_up_copies
        if stage == "fit" and "train" not in store and copies and not self.val_path:
            rows = read(self.require("train"), False)
            n = len(rows) // (1 + copies)  # the sentences as read, then each copy of them in the same order
            train, val = train_val_split(list(range(n)), self.val_fraction, self.seed)
            store["train"] = rows.select([i + n * copy for copy in range(1 + copies) for i in train])
            store["val"] = rows.select(val)
        super().read_splits(stage, store, read)

    def setup(self, stage: str) -> None:
        """Map the row stores the stage needs (sentences and windows); on fit, fix the tag vocabulary from the
        training split; label every split's windows with it."""
        self.read_stored_splits(stage, self.view, self.sentences)
        for split, sentences in self.sentences.items():
            if split not in self.datasets:
                windows = sentences.memo["windows"]
                mine = np.isin(windows.column("sentence"), sentences.indices)  # the windows of the split's sentences
                self.datasets[split] = windows.select(np.flatnonzero(mine))
        self.settle_labels("train" in self.sentences)

    def view(self, split: str, path: str, store: Store) -> StoreRows:
        """A store's sentences as rows (`self.sentences`), their windows kept in the table's memo."""
        sentences = StoreRows(store.table(SENTENCES))
        windows = StoreRows(store.table())
        if split == "predict":
            windows = windows.with_hook("record", SentenceFields(sentences.table))
        sentences.memo["windows"] = windows
        return sentences

    def read(self, path: str, labelled: bool = True) -> list[TaggedSentence]:
        """The sentences of a file (or files), tags checked against the scheme and made canonical."""
        check = (lambda tag: tag_problem(tag, self.tag_scheme)) if labelled else None  # to predict, tags are unused
        sentences = read_sentences(
            path, self.format, labelled, check, self.encoding, word_split=self.word_split, **self.fields
        )
        for sentence in sentences:
            if sentence.tags is not None:
                sentence.tags = to_canonical(sentence.tags, self.tag_scheme)
        return sentences

    def training_vocabulary(self) -> LabelVocabulary:
        """`--data.labels` in their order, else a ClassLabel tags column's names (when the scheme keeps them as they
        are), else O and every scheme tag of each type the training data has."""
        if self.fixed_labels:
            for tag in self.fixed_labels:
                problem = tag_problem(tag, self.scheme)
                if problem is not None:
                    raise DataError(f"--data.labels: {problem}")
            return LabelVocabulary(self.fixed_labels)
        names = self.source_label_names(self.fields["tags_field"]) if self.scheme == self.tag_scheme else None
        if names and all(tag_problem(tag, self.scheme) is None for tag in names):
            return LabelVocabulary(names)
        train = self.sentences["train"]
        return LabelVocabulary(scheme_tags(tag_column(train).tags(tag_entries(train)), self.scheme))

    def spec_fields(self) -> dict[str, Any]:
        """The tag vocabulary and the scheme its tags follow."""
        return {"labels": self.vocabulary, "extras": {"scheme": self.scheme}}

    def use_spec(self, spec: DataSpec) -> None:
        """Read tags as a checkpoint's spec says; data in another tag scheme is an error."""
        scheme = spec.extras.get("scheme", self.scheme)
        if scheme != self.scheme:
            raise DataError(f"the data's tag scheme {self.scheme} differs from the checkpoint's {scheme}")
        super().use_spec(spec)

    def use_labels(self, vocabulary: LabelVocabulary) -> None:
        """Label every labelled split's windows with this vocabulary; an unknown tag is a DataError at its line."""
        self.vocabulary = vocabulary
        for split, sentences in self.sentences.items():
            if split == "predict":
                continue
            column = tag_column(sentences)
            ids = column.encode(vocabulary, tag_entries(sentences)).ids()
            labels = WindowLabels(ids, sentences.memo["offsets"], continuation_ids(vocabulary))
            self.datasets[split] = self.datasets[split].with_hook("labels", labels)

    # --- batches -------------------------------------------------------------------------------------
    def collate(self, rows: list[Row]) -> dict[str, Any]:
        """Padded windows; `sentence` numbered within the batch; one record and word list per sentence."""
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        keep = ("input_ids", "labels", "word_index")
        batch = PaddingCollator(pad_id, pad_values={"word_index": IGNORE_INDEX})(
            [{k: r[k] for k in keep} for r in rows]
        )
        order = list(dict.fromkeys(r["sentence"] for r in rows))
        local = {s: i for i, s in enumerate(order)}
        batch["token_type_ids"] = batch["input_ids"].new_zeros(batch["input_ids"].shape)  # (B, T) one segment
        batch["sentence"] = batch["input_ids"].new_tensor([local[r["sentence"]] for r in rows])  # (B,)
        if "record" in rows[0]:
            first = {r["sentence"]: r for r in reversed(rows)}
            batch["records"] = [first[s]["record"] for s in order]
            batch["words"] = [first[s]["words"] for s in order]
            batch["word_split"] = self.word_split
        return batch

    def loader(self, split: str, shuffle: bool = False) -> DataLoader:
        """Batches of whole sentences (shuffled, or with `bucket` of similar length, for training)."""
        rows = self.datasets[split]
        lengths = rows.lengths().tolist() if self.bucket and shuffle else None
        sampler = SentenceBatches(rows.column("sentence").tolist(), self.batch_size, shuffle, lengths, self.seed)
        return self.make_loader(rows, train=shuffle, collate_fn=self.collate, batch_sampler=sampler)


def scheme_tags(tags: Iterable[str], scheme: str) -> list[str]:
    """O, then for each entity type the tags have (sorted) the scheme's tags: B-X, I-X (E-X, S-X)."""
    kinds = sorted({split_tag(tag)[1] for tag in tags} - {""})
    if not kinds:
        raise DataError("the training data has no entity tags (every tag is O)")
    return ["O", *(f"{prefix}-{kind}" for kind in kinds for prefix in PREFIXES[scheme])]


def tag_column(sentences: StoreRows) -> LabelColumn:
    """Every tag of the sentences' store table, flat and coded once per table (with each sentence's offset)."""
    if "tags" not in sentences.memo:
        tags = sentences.table.data.column("tags").combine_chunks()
        offsets = tags.offsets.to_numpy() - tags.offsets[0].as_py()
        sentences.memo["offsets"] = offsets
        sentences.memo["tags"] = LabelColumn.of(tags.flatten(), partial(_tag_line, sentences, offsets), decode=False)
    return sentences.memo["tags"]


def tag_entries(sentences: StoreRows) -> np.ndarray:
    """The flat positions of these sentences' tags, sentence by sentence."""
    tag_column(sentences)
    offsets = sentences.memo["offsets"]
    starts, ends = offsets[sentences.indices], offsets[sentences.indices + 1]
    return np.concatenate([np.arange(a, b) for a, b in zip(starts, ends, strict=True)] or [np.zeros(0, np.int64)])


def _tag_line(sentences: StoreRows, offsets: np.ndarray, entry: int) -> tuple[str, int]:
    """(file, line) of a flat tag: its sentence's file, and the word's line (CoNLL) or the sentence's."""
    sentence = int(np.searchsorted(offsets, entry, side="right")) - 1
    source, line = sentences.location(sentence)
    per_line = sentences.table.data.column("per_line")[sentence].as_py()
    return source, (line + entry - int(offsets[sentence])) if per_line else line


def continuation_ids(vocabulary: LabelVocabulary) -> np.ndarray:
    """Tag id -> the tag id of a word's later subwords: I-X for B-X (as Hugging Face's `label_all_tokens`), else
    the word's own tag, so an entity never seems to start again inside a word."""
    ids = np.arange(len(vocabulary))
    for i, name in enumerate(vocabulary.names):
        prefix, kind = split_tag(name)
        if prefix == "B" and f"I-{kind}" in vocabulary.ids:
            ids[i] = vocabulary.ids[f"I-{kind}"]
    return ids
