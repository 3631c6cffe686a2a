"""Packed examples (position_ids restarting per example, document_ids) give each example its unpacked logits."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.core.masks import combine_masks

LENGTHS = (5, 3, 6)  # three examples laid end to end, then two padding tokens
PAD = 2


def packed(examples: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(1, T) ids, position ids from 0 per example and document ids (padding -1) of the examples packed in a row."""
    ids = torch.cat([*examples, torch.zeros(PAD, dtype=torch.long)])[None]
    positions = torch.cat([torch.arange(len(e)) for e in examples] + [torch.zeros(PAD, dtype=torch.long)])[None]
    documents = torch.cat([torch.full((len(e),), i) for i, e in enumerate(examples)] + [torch.full((PAD,), -1)])
    return ids, positions, documents[None]


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rotary", "alibi", "relative"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_packed_row_equals_each_example_alone(
    tiny_config: Callable[..., TransformerConfig], position: str, attention: str
) -> None:
    """Every packed example's logits equal its own forward pass: no attention across examples, positions from 0."""
    net = CausalLM(tiny_config(position=position, attention=attention)).eval()
    examples = [torch.randint(3, 100, (n,)) for n in LENGTHS]
    ids, positions, documents = packed(examples)
    with torch.no_grad():
        logits = net(ids, position_ids=positions, document_ids=documents)[0]  # (T, V)
        start = 0
        for example in examples:
            alone = net(example[None])[0]
            torch.testing.assert_close(logits[start : start + len(example)], alone, atol=1e-5, rtol=1e-5)
            start += len(example)
    assert torch.isfinite(logits).all()  # the padding rows attend only padding, never nothing


def test_examples_never_see_each_other(tiny_config: Callable[..., TransformerConfig]) -> None:
    """Changing one packed example's tokens leaves the other example's logits exactly as they were."""
    net = CausalLM(tiny_config(position="rotary")).eval()
    ids, positions, documents = packed([torch.randint(3, 100, (4,)), torch.randint(3, 100, (4,))])
    first, second = slice(0, 4), slice(4, 8)
    with torch.no_grad():
        before = net(ids, position_ids=positions, document_ids=documents)[0]
        for changed, kept in ((first, second), (second, first)):
            other = ids.clone()
            other[0, changed] = (ids[0, changed] + 1) % 100
            after = net(other, position_ids=positions, document_ids=documents)[0]
            assert not torch.allclose(after[changed], before[changed])
            torch.testing.assert_close(after[kept], before[kept], atol=0, rtol=0)


def test_document_mask_is_block_diagonal_and_causal() -> None:
    """A query attends earlier-or-same keys of its own document only."""
    documents = torch.tensor([[0, 0, 1, 1, 1]])
    mask = combine_masks(None, True, 5, 5, documents=documents)[0, 0]
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [0, 0, 1, 0, 0],
            [0, 0, 1, 1, 0],
            [0, 0, 1, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(mask, expected)


def test_document_ids_refuse_a_cache(tiny_config: Callable[..., TransformerConfig]) -> None:
    """Cached decoding has one document per row: document_ids with a cache are an error, not a silent mask."""
    net = CausalLM(tiny_config()).eval()
    with pytest.raises(ValueError, match="document_ids"):
        net(torch.ones(1, 3, dtype=torch.long), cache=net.new_cache(), document_ids=torch.zeros(1, 3, dtype=torch.long))
