"""PaddingCollator: shapes, masks, -100 labels, left padding, pass-through fields, one-token rows."""

from __future__ import annotations

import torch

from tetraformer.data import IGNORE_INDEX, PaddingCollator

PAD = 0


def rows() -> list[dict]:
    """Two token-classification rows of lengths 3 and 1, with a scalar, a fixed-size tensor and a string."""
    return [
        {
            "input_ids": [5, 6, 7],
            "token_type_ids": [0, 0, 1],
            "labels": [1, 2, 3],
            "id": 4,
            "pixel": torch.ones(2),
            "text": "abc",
            "words": ["a", "b"],
        },
        {
            "input_ids": torch.tensor([8]),
            "token_type_ids": [0],
            "labels": [4],
            "id": 9,
            "pixel": torch.zeros(2),
            "text": "d",
            "words": ["d"],
        },
    ]


def test_right_padding_shapes_masks_and_labels() -> None:
    """Sequences pad to the longest row: ids with the pad id, types with 0, labels with -100; mask is bool."""
    batch = PaddingCollator(pad_id=PAD)(rows())
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, PAD, PAD]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 1], [0, 0, 0]]
    assert batch["labels"].tolist() == [[1, 2, 3], [4, IGNORE_INDEX, IGNORE_INDEX]]
    assert batch["attention_mask"].dtype == torch.bool
    assert batch["attention_mask"].tolist() == [[True, True, True], [True, False, False]]
    assert batch["input_ids"].dtype == torch.long


def test_scalars_and_fixed_size_fields_stack_others_pass_through() -> None:
    """Scalars -> (B,), equal-shape tensors -> (B, ...); strings and lists of words stay lists."""
    batch = PaddingCollator(pad_id=PAD)(rows())
    assert torch.equal(batch["id"], torch.tensor([4, 9]))
    assert batch["pixel"].shape == (2, 2)
    assert batch["text"] == ["abc", "d"] and batch["words"] == [["a", "b"], ["d"]]


def test_left_padding() -> None:
    """side="left" puts the padding before the tokens (for decoder-only generation), masks to match."""
    batch = PaddingCollator(pad_id=3, side="left")(rows())
    assert batch["input_ids"].tolist() == [[5, 6, 7], [3, 3, 8]]
    assert batch["labels"].tolist() == [[1, 2, 3], [IGNORE_INDEX, IGNORE_INDEX, 4]]
    assert batch["attention_mask"].tolist() == [[True, True, True], [False, False, True]]


def test_rows_of_one_token() -> None:
    """A batch whose rows all hold one token gives (B, 1) tensors and an all-true mask."""
    batch = PaddingCollator(pad_id=PAD)([{"input_ids": [1]}, {"input_ids": [2]}])
    assert batch["input_ids"].shape == (2, 1) and batch["attention_mask"].all()


def test_class_labels_stack_and_padding_values_can_be_added() -> None:
    """One label per row stacks to (B,); extra fields can be given a padding value."""
    batch = PaddingCollator(pad_id=PAD, pad_values={"spans": -1})(
        [{"input_ids": [1, 2], "labels": 2, "spans": [7]}, {"input_ids": [3], "labels": 0, "spans": [8, 9]}]
    )
    assert batch["labels"].tolist() == [2, 0]
    assert batch["spans"].tolist() == [[7, -1], [8, 9]]
