"""T5 span corruption: every token once across input and target, consecutive sentinels, T5's noise statistics."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from tetraformer.data import train_tokenizer
from tetraformer.data.span_corruption import SpanCorruptionCollator, SpanCorruptor

EOS, PAD, START = 1, 0, 0
SENTINELS = list(range(999, 899, -1))  # 100 sentinels counting down from the top, as in HF T5
IS_SENTINEL = set(SENTINELS)


def corruptor(**options: float) -> SpanCorruptor:
    """A corruptor over SENTINELS with T5's defaults unless overridden."""
    return SpanCorruptor(SENTINELS, EOS, **options)


def sequences(count: int, seed: int = 0, lengths: tuple[int, int] = (1, 300)) -> list[list[int]]:
    """`count` sequences of random lengths of token ids 10..899 (no EOS, no sentinel)."""
    rng = random.Random(seed)
    return [[rng.randrange(10, 899) for _ in range(rng.randint(*lengths))] for _ in range(count)]


def reconstruct(inputs: list[int], targets: list[int]) -> list[int]:
    """The original sequence: each sentinel in the input replaced by the tokens after it in the target."""
    assert inputs[-1] == EOS and targets[-1] == EOS
    spans: dict[int, list[int]] = {}
    current: list[int] = []
    for token in targets[:-1]:
        if token in IS_SENTINEL:
            current = spans.setdefault(token, [])
        else:
            current.append(token)
    out: list[int] = []
    for token in inputs[:-1]:
        out.extend(spans.pop(token) if token in IS_SENTINEL else [token])
    assert not spans  # every span of the target was used
    return out


def test_every_token_appears_exactly_once_across_input_and_target() -> None:
    """Replacing the input's sentinels by the target's spans gives back the original, for any length."""
    corrupt = corruptor()
    for ids in sequences(300):
        inputs, targets = corrupt(ids)
        assert reconstruct(inputs, targets) == ids
        spans = corrupt.counts(len(ids))[1]
        assert len(inputs) + len(targets) == len(ids) + 2 * spans + 2  # plus a sentinel twice per span, 2 EOS


def test_sentinels_are_consecutive_and_in_the_same_order() -> None:
    """The input holds <extra_id_0>, <extra_id_1>, ... in order; the target the same ones, each once."""
    corrupt = corruptor()
    for ids in sequences(200, seed=1, lengths=(2, 300)):
        inputs, targets = corrupt(ids)
        in_input = [t for t in inputs if t in IS_SENTINEL]
        in_target = [t for t in targets if t in IS_SENTINEL]
        assert in_input == in_target == SENTINELS[: len(in_input)]
        assert len(in_input) == corrupt.counts(len(ids))[1] >= 1
        assert targets[0] == SENTINELS[0]  # the target starts with the first span


def test_noise_density_and_mean_span_length_over_a_large_sample() -> None:
    """Over many sequences, 15% of tokens are noise and noise spans are 3 tokens long on average."""
    corrupt = corruptor()
    noise = spans = total = 0
    span_lengths: set[int] = set()
    for ids in sequences(2000, seed=2, lengths=(20, 400)):
        _, targets = corrupt(ids)
        marks = [i for i, t in enumerate(targets) if t in IS_SENTINEL] + [len(targets) - 1]
        span_lengths |= {b - a - 1 for a, b in zip(marks[:-1], marks[1:], strict=True)}
        noise += len(targets) - 1 - (len(marks) - 1)
        spans += len(marks) - 1
        total += len(ids)
    assert noise / total == pytest.approx(0.15, abs=0.005)
    assert noise / spans == pytest.approx(3.0, abs=0.1)
    assert min(span_lengths) == 1 and max(span_lengths) > 6  # random segmentation, not fixed-length spans


def test_other_density_and_span_length() -> None:
    corrupt = corruptor(noise_density=0.3, mean_span_length=5.0)
    assert corrupt.counts(100) == (30, 6)
    noise = sum(corrupt.noise_mask(200).sum().item() for _ in range(20))
    assert noise == 20 * 60


def test_spans_fall_anywhere_but_the_first_token() -> None:
    """Noise covers every position of a fixed-length sequence at some draw except the first (T5 starts kept)."""
    corrupt = corruptor()
    masks = torch.stack([corrupt.noise_mask(40) for _ in range(500)])  # (500, 40)
    assert not masks[:, 0].any()
    assert masks[:, 1:].any(0).all()


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ([], ([EOS], [EOS])),
        ([7], ([7, EOS], [EOS])),
        ([7, 8], ([7, 999, EOS], [999, 8, EOS])),
        ([7, 8, 9], ([7, 8, 999, EOS], [999, 9, EOS])),
    ],
)
def test_short_sequences(ids: list[int], expected: tuple[list[int], list[int]]) -> None:
    """0-1 tokens are kept whole; 2-3 tokens get one one-token span, at the end as T5 places a lone span."""
    assert corruptor()(ids) == expected


def test_seeded_generators_repeat_and_differ_by_seed() -> None:
    corrupt, ids = corruptor(), list(range(10, 210))
    first = corrupt(ids, torch.Generator().manual_seed(5))
    assert corrupt(ids, torch.Generator().manual_seed(5)) == first
    assert corrupt(ids, torch.Generator().manual_seed(6)) != first


def test_collator_corrupts_anew_each_epoch_and_repeats_under_the_same_seed() -> None:
    """Unseeded rows differ between two passes (epochs); torch.manual_seed repeats them; seeded rows are fixed."""
    collate = SpanCorruptionCollator(corruptor(), PAD, START)
    rows = [{"input_ids": ids} for ids in sequences(4, seed=3, lengths=(40, 80))]
    torch.manual_seed(0)
    epoch_one, epoch_two = collate(rows), collate(rows)
    assert not torch.equal(epoch_one["input_ids"], epoch_two["input_ids"])
    torch.manual_seed(0)
    assert torch.equal(collate(rows)["input_ids"], epoch_one["input_ids"])
    seeded = [{**row, "noise_seed": 11 + i} for i, row in enumerate(rows)]
    fixed = collate(seeded)
    torch.manual_seed(123)
    assert torch.equal(collate(seeded)["labels"], fixed["labels"])
    alone = collate(seeded[:1])["labels"][0]  # a seeded row's corruption does not depend on its batch
    assert fixed["labels"][0, : len(alone)].tolist() == alone.tolist()


def test_collator_builds_a_seq2seq_batch() -> None:
    """Inputs padded with pad, labels with -100, decoder inputs = labels shifted right after the start id."""
    rows = [{"input_ids": ids, "noise_seed": i} for i, ids in enumerate(sequences(3, seed=4, lengths=(5, 60)))]
    batch = SpanCorruptionCollator(corruptor(), PAD, START)(rows)
    for b, row in enumerate(rows):
        inputs, targets = corruptor()(row["input_ids"], torch.Generator().manual_seed(row["noise_seed"]))
        assert batch["input_ids"][b, : len(inputs)].tolist() == inputs
        assert batch["input_ids"][b, len(inputs) :].eq(PAD).all()
        assert batch["attention_mask"][b].sum().item() == len(inputs)
        assert batch["labels"][b, : len(targets)].tolist() == targets
        assert batch["labels"][b, len(targets) :].eq(-100).all()
        assert batch["decoder_input_ids"][b, : len(targets)].tolist() == [START, *targets[:-1]]


def test_too_few_sentinels_and_bad_options_are_errors() -> None:
    with pytest.raises(ValueError, match="a sequence of 200 tokens gets 10 noise spans but there are only 3"):
        SpanCorruptor([5, 6, 7], EOS)(list(range(10, 210)))
    with pytest.raises(ValueError, match="noise_density must be between 0 and 1"):
        corruptor(noise_density=1.0)
    with pytest.raises(ValueError, match="mean_span_length must be >= 1"):
        corruptor(mean_span_length=0.5)
    with pytest.raises(ValueError, match="needs sentinel ids"):
        SpanCorruptor([], EOS)


def test_from_tokenizer_uses_its_sentinels_and_eos(tmp_path: Path) -> None:
    """A trained tokenizer with extra_ids gives the corruptor its <extra_id_*> ids; decoded text shows them."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog\n" * 10, encoding="utf-8")
    tokenizer = train_tokenizer(corpus, "char", 60, tmp_path / "tok", extra_ids=8)
    corrupt = SpanCorruptor.from_tokenizer(tokenizer)
    assert corrupt.sentinels.tolist() == tokenizer.convert_tokens_to_ids([f"<extra_id_{i}>" for i in range(8)])
    ids = tokenizer("the quick brown fox jumps", add_special_tokens=False)["input_ids"]
    inputs, targets = corrupt(ids, torch.Generator().manual_seed(0))
    assert tokenizer.decode(inputs).startswith("the") and "<extra_id_0>" in tokenizer.decode(inputs)
    assert tokenizer.decode(targets).startswith("<extra_id_0>") and tokenizer.decode(targets).endswith("</s>")
