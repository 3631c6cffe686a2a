"""pack_token_ids / pack_documents: eos between documents, (N, block_size + 1) blocks."""

import pytest
import torch
from datasets import Dataset

from tetraformer.data import DataError, pack_documents, pack_token_ids, train_tokenizer

EOS = 0


def test_blocks_shape_and_eos_between_documents() -> None:
    blocks = pack_token_ids([[1, 2, 3], [4, 5], [6, 7, 8, 9]], block_size=4, eos_id=EOS)
    # stream: 1 2 3 E 4 5 E 6 7 8 9 E  (12 tokens) -> (12 - 1) // 4 = 2 blocks of 5, tail dropped
    assert blocks.dtype == torch.long
    assert blocks.tolist() == [[1, 2, 3, EOS, 4], [4, 5, EOS, 6, 7]]


def test_consecutive_blocks_share_one_token_so_targets_cover_the_stream() -> None:
    blocks = pack_token_ids([list(range(1, 20))], block_size=6, eos_id=EOS)
    inputs, targets = blocks[:, :-1], blocks[:, 1:]
    assert blocks.shape == (3, 7)
    assert torch.equal(blocks[:-1, -1], blocks[1:, 0])
    assert targets.flatten().tolist() == list(range(2, 20))
    assert inputs.shape == targets.shape == (3, 6)


def test_corpus_smaller_than_one_block() -> None:
    with pytest.raises(DataError, match=r"corpus too small: 6 tokens .* needs block_size \+ 1 = 9"):
        pack_token_ids([[1, 2], [3, 4]], block_size=8, eos_id=EOS)


@pytest.fixture(scope="module")
def char_tokenizer(tmp_path_factory):
    corpus = tmp_path_factory.mktemp("corpus") / "c.txt"
    corpus.write_text("abcdefgh ijk\n", encoding="utf-8")
    return train_tokenizer(corpus, "char", 100, tmp_path_factory.mktemp("tok"))


def test_pack_documents_from_a_dataset(char_tokenizer) -> None:
    ds = Dataset.from_dict({"text": ["abc", "de", "fgh"], "source": ["x", "x", "y"]})
    blocks = pack_documents(ds, char_tokenizer, block_size=3)
    eos = char_tokenizer.eos_token_id
    decoded = [char_tokenizer.convert_ids_to_tokens(row) for row in blocks.tolist()]
    assert decoded == [["a", "b", "c", "</s>"], ["</s>", "d", "e", "</s>"], ["</s>", "f", "g", "h"]]
    assert (blocks == eos).sum() == 4
    assert not (blocks == char_tokenizer.bos_token_id).any()


def test_pack_documents_from_strings_matches_dataset(char_tokenizer) -> None:
    texts = ["abc", "de", "fgh"]
    from_list = pack_documents(texts, char_tokenizer, block_size=3, batch_size=2)
    assert torch.equal(from_list, pack_documents(Dataset.from_dict({"text": texts}), char_tokenizer, 3))


def test_missing_text_column(char_tokenizer) -> None:
    with pytest.raises(DataError, match="dataset has no column 'text' \\(columns: body\\)"):
        pack_documents(Dataset.from_dict({"body": ["a"]}), char_tokenizer, block_size=2)
