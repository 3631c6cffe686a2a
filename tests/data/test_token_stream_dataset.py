"""The token stream: the store's blocks, read in shares that partition the corpus, in a seeded order, resumable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerFast

from tests.data.letter_corpus import (
    LETTERS,
    OPTIONS,
    char_tokenizer,
    first_blocks,
    letter_docs,
    letters,
    pass_length,
    pass_letters,
    stream,
)
from tetraformer.data.corpus_store import TOKENS, corpus_store, held_out_store, n_tokens, training_sources
from tetraformer.data.token_blocks import CorpusIds, TokenBlocks
from tetraformer.data.token_stream_dataset import Share, ShareState, TokenStream


@pytest.fixture(scope="module")
def chars(tmp_path_factory: pytest.TempPathFactory) -> PreTrainedTokenizerFast:
    """A character tokenizer knowing letters, digits and punctuation."""
    return char_tokenizer(tmp_path_factory.mktemp("chars"))


# --- packing -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("documents", ["line", "file", "paragraph"])
def test_one_unshuffled_share_gives_the_store_blocks_pass_after_pass(
    chars: PreTrainedTokenizerFast, tmp_path: Path, documents: str
) -> None:
    """Read in order as one share, a pass's blocks are the corpus store's blocks of the same files (block_size + 1
    ids, one every block_size, the tail dropped), and the next pass starts again with block 0."""
    files = letter_docs(tmp_path / "c", 3, 4)
    read = {**OPTIONS, "documents": documents}
    blocks = TokenBlocks(corpus_store("lm", files, chars, read, tmp_path / "cache"), 4)
    got = [block for block, _ in first_blocks(stream(files, chars, read=read), len(blocks) + 2)]
    expected = [blocks[i].tolist() for i in range(len(blocks))]
    assert got == expected + expected[:2]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_record_files_give_the_blocks_of_their_texts(
    chars: PreTrainedTokenizerFast, tmp_path: Path, suffix: str
) -> None:
    """JSONL and Parquet (3 rows a row group) texts stream as the same texts as plain lines do."""
    lines, records = letter_docs(tmp_path / "t", 2, 5), letter_docs(tmp_path / "r", 2, 5, suffix)
    assert first_blocks(stream(records, chars), 40) == first_blocks(stream(lines, chars), 40)


def test_batches_stack_blocks_as_int64(chars: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    """A batch is batch_size consecutive blocks of the share, as one (batch, block_size + 1) int64 tensor."""
    data = stream(letter_docs(tmp_path / "c", 2, 6), chars)
    batch, state = next(iter(data))
    assert batch["input_ids"].dtype == torch.int64
    assert batch["input_ids"].tolist() == [block for block, _ in first_blocks(data, 3)]
    assert ShareState.from_dict(state) == first_blocks(data, 3)[-1][1]


# --- sharding ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n_files", "shares"), [(4, 2), (6, 3), (1, 3), (3, 4)], ids=["files", "files-3", "documents", "documents-4"]
)
def test_shares_partition_the_documents(
    chars: PreTrainedTokenizerFast, tmp_path: Path, n_files: int, shares: int
) -> None:
    """Every share reads its own documents (every n-th file when there are enough files, else every n-th
    document): shares are disjoint and together read every document."""
    data = stream(letter_docs(tmp_path / "c", n_files, 12 // n_files), chars, shuffle_blocks=8)
    seen = [pass_letters(data, Share(s, shares)) for s in range(shares)]
    assert all(seen)
    assert sum(len(letters) for letters in seen) == len(set().union(*seen)) == 12


def test_a_share_without_a_block_is_one_line(chars: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    """A share whose whole pass has fewer ids than one block names the share and what to change."""
    (tmp_path / "tiny.txt").write_text("ab\ncd\n", encoding="utf-8")
    data = stream([tmp_path / "tiny.txt"], chars)
    with pytest.raises(Exception, match=r"share 1 of 2 .* fewer than block_size \+ 1 = 5 tokens"):
        first_blocks(data, 1, Share(1, 2))


# --- order -------------------------------------------------------------------------------------------
def test_order_is_drawn_from_the_seed_only(chars: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    """The same seed gives the same blocks whatever the global RNGs hold, and leaves them untouched; another seed,
    or the next pass, gives another order of the same documents (files and blocks shuffled)."""
    files = letter_docs(tmp_path / "c", 4, 5)
    n = pass_length(stream(files, chars))

    def two_passes(seed: int) -> list[list[int]]:
        return [block for block, _ in first_blocks(stream(files, chars, shuffle_blocks=1000, seed=seed), 2 * n)]

    torch.manual_seed(1)
    np.random.seed(1)
    before = (torch.get_rng_state(), np.random.get_state()[1].copy())
    one = two_passes(0)
    assert torch.equal(before[0], torch.get_rng_state()) and np.array_equal(before[1], np.random.get_state()[1])
    torch.manual_seed(2)
    np.random.seed(2)
    assert two_passes(0) == one
    other = two_passes(7)
    assert one[:n] != other[:n] and one[:n] != one[n:]
    for blocks in (one[:n], one[n:], other[:n]):
        assert letters(chars, [i for block in blocks for i in block]) == set(LETTERS[:20])


def test_windows_mix_only_nearby_blocks(chars: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    """With shuffle_blocks k, each run of k blocks is a permutation of k consecutive blocks of the file order."""
    files = letter_docs(tmp_path / "c", 1, 12)
    in_order = [b for b, _ in first_blocks(stream(files, chars), 12)]
    shuffled = [b for b, _ in first_blocks(stream(files, chars, shuffle_blocks=4), 12)]
    assert shuffled != in_order
    assert all(sorted(shuffled[i : i + 4]) == sorted(in_order[i : i + 4]) for i in range(0, 12, 4))


# --- resume ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("documents", "shares"), [("line", 1), ("line", 2), ("file", 1)])
def test_any_state_resumes_the_same_blocks(
    chars: PreTrainedTokenizerFast, tmp_path: Path, documents: str, shares: int
) -> None:
    """From the state after any block (mid-window, mid-document, in the next pass), through a checkpoint's plain
    dict, a new stream continues with exactly the blocks of the one that never stopped."""
    files = letter_docs(tmp_path / "c", 1 if documents == "line" else 3, 6)
    data = stream(files, chars, shuffle_blocks=5, read={"documents": documents})
    n = 2 * pass_length(data) + 3
    straight = first_blocks(data, n, Share(shares - 1, shares))
    for k in range(0, n - 1):
        state = ShareState.from_dict(straight[k][1].to_dict())
        again = stream(files, chars, shuffle_blocks=5, read={"documents": documents})
        assert first_blocks(again, n - k - 1, Share(shares - 1, shares), state) == straight[k + 1 :], k


# --- held-out validation -----------------------------------------------------------------------------
@pytest.mark.parametrize(("n_files", "held"), [(3, 2), (3, 4), (3, 9)])
def test_held_out_documents_are_validated_and_never_streamed(
    chars: PreTrainedTokenizerFast, tmp_path: Path, n_files: int, held: int
) -> None:
    """The first `held` documents (in file order) go to the held-out store, the stream reads all the others."""
    files = letter_docs(tmp_path / "c", n_files, 4)
    store = held_out_store("held", files, chars, OPTIONS, held, tmp_path / "cache")
    assert letters(chars, CorpusIds(store).slice(0, n_tokens(store)).tolist()) == set(LETTERS[:held])
    assert [row[-1] for row in store.table(TOKENS)["input_ids"]] == [chars.eos_token_id] * held  # a row a document
    data = TokenStream(training_sources(files, store), OPTIONS, chars, 4, 3, shuffle_blocks=8)
    assert pass_letters(data, Share()) == set(LETTERS[held : 4 * n_files])
    again = held_out_store("held", files, chars, OPTIONS, held, tmp_path / "cache")
    assert again.path == store.path  # the same part on every run and rank: built once


def test_holding_out_every_document_is_one_line(chars: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    """When val_documents takes the whole corpus, the error says so and what to set."""
    files = letter_docs(tmp_path / "c", 2, 3)
    with pytest.raises(Exception, match=r"--data.val_documents 6 holds out every document .*\(6\).*--data.val_path"):
        held_out_store("held", files, chars, OPTIONS, 6, tmp_path / "cache")
