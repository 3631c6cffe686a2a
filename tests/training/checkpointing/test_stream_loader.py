"""StreamLoader: ranks and workers read disjoint shares; its state, taken as training takes batches, resumes exactly."""

from __future__ import annotations

import multiprocessing
from itertools import islice
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from tests.data.letter_corpus import char_tokenizer, first_blocks, letter_docs, letters, stream
from tetraformer.data import DataError
from tetraformer.data.token_stream_dataset import ShareState
from tetraformer.errors import ConfigError
from tetraformer.training.callbacks.token_budget import TokenBudget
from tetraformer.training.checkpointing.resume import BATCH_INDEX, take_batch_index
from tetraformer.training.checkpointing.stream_loader import StreamLoader, check_stream_trainer


@pytest.fixture(scope="module")
def chars(tmp_path_factory: pytest.TempPathFactory) -> PreTrainedTokenizerFast:
    """A character tokenizer knowing letters, digits and punctuation."""
    return char_tokenizer(tmp_path_factory.mktemp("chars"))


def test_ranks_and_workers_read_disjoint_shares(chars: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    """Through StreamLoader: 2 ranks x 2 workers read four disjoint parts that cover the corpus."""
    files = letter_docs(tmp_path / "c", 8, 2)
    seen: list[set[str]] = []
    for rank in range(2):
        loader = StreamLoader(stream(files, chars, batch_size=4), num_workers=2, num_replicas=2, rank=rank)
        batches = list(islice(iter(loader), 40))
        for worker in range(2):  # workers take turns: batch k is worker k % 2's
            tokens = [i for batch in batches[worker::2] for i in batch["input_ids"].flatten().tolist()]
            seen.append(letters(chars, tokens))
    assert sum(len(letters) for letters in seen) == len(set().union(*seen)) == 16


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_state_resumes_at_the_next_batch_taken(
    chars: PreTrainedTokenizerFast, tmp_path: Path, workers: int
) -> None:
    """A StreamLoader's state after training took k batches (while it had served more) resumes a new loader at
    batch k; a loader given no state starts again."""
    files = letter_docs(tmp_path / "c", 2, 8)

    def loader() -> StreamLoader:
        return StreamLoader(stream(files, chars, shuffle_blocks=5), num_workers=workers)

    straight = [batch["input_ids"].tolist() for batch in islice(iter(loader()), 12)]
    first = loader()
    batches = iter(first)
    served = [next(batches) for _ in range(7)]  # served ahead of training, as Lightning prefetches
    taken = [take_batch_index(batch, first) for batch in served[:5]]
    assert all(BATCH_INDEX not in batch for batch in taken)
    state = first.state_dict()
    assert state["ranks"][0]["taken"] == 5
    resumed = loader()
    resumed.load_state_dict(torch.load(_saved(state, tmp_path), weights_only=True))
    assert [batch["input_ids"].tolist() for batch in islice(iter(resumed), 7)] == straight[5:]
    assert [batch["input_ids"].tolist() for batch in islice(iter(loader()), 7)] != straight[5:]


def _saved(state: dict[str, Any], tmp_path: Path) -> Path:
    """The state written as a checkpoint writes it."""
    path = tmp_path / "state.pt"
    torch.save(state, path)
    return path


def test_a_checkpoint_of_other_workers_starts_the_next_pass(chars: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    """Resumed with another number of workers, the positions do not fit: each share starts the pass after the
    furthest one the checkpoint reached (logged), not again at the first blocks."""
    files = letter_docs(tmp_path / "c", 2, 8)
    one = StreamLoader(stream(files, chars, shuffle_blocks=100), num_workers=0)
    one.load_state_dict({"ranks": [{"taken": 9, "workers": 2, "states": {0: ShareState(3).to_dict()}}]})
    batch = next(iter(one))["input_ids"].tolist()
    fourth = [block for block, _ in first_blocks(stream(files, chars, shuffle_blocks=100), 3, state=ShareState(4))]
    assert batch == fourth and batch != [
        block for block, _ in first_blocks(stream(files, chars, shuffle_blocks=100), 3)
    ]


def trainer(**settings: Any) -> SimpleNamespace:
    """The Trainer settings check_stream_trainer reads (Lightning's defaults unless given)."""
    defaults = {"max_steps": -1, "val_check_interval": 1.0, "limit_val_batches": 1.0, "callbacks": []}
    return SimpleNamespace(**(defaults | settings))


def test_a_stream_needs_max_steps_and_a_step_interval(caplog: pytest.LogCaptureFixture) -> None:
    """No --trainer.max_steps nor --run.max_tokens, or a validation interval that is a share of an epoch: one line
    saying what to set; validation only at epoch ends (never, for a stream): a warning."""
    with pytest.raises(ConfigError, match=r"whose epoch never ends: set --trainer.max_steps or --run.max_tokens"):
        check_stream_trainer(trainer())
    check_stream_trainer(trainer(callbacks=[TokenBudget(1000, counter=None)], val_check_interval=50))
    with pytest.raises(ConfigError, match=r"--trainer.val_check_interval 0.25 is a share .*\(an int\)"):
        check_stream_trainer(trainer(max_steps=10, val_check_interval=0.25))
    check_stream_trainer(trainer(max_steps=10, val_check_interval=50))
    assert not caplog.records
    check_stream_trainer(trainer(max_steps=10))
    assert "set --trainer.val_check_interval N" in caplog.text


@pytest.mark.parametrize("workers", [0, 2])
def test_a_bad_shard_met_by_a_worker_is_one_line(chars: PreTrainedTokenizerFast, tmp_path: Path, workers: int) -> None:
    """A corrupt Parquet shard found mid-stream stops it with the reader's one line (file and why), not the
    worker's traceback, and the loader's workers stop with it (not when the garbage collector gets to them, which
    took 10 s)."""
    files = letter_docs(tmp_path / "c", 2, 4)
    bad = tmp_path / "c" / "bad.parquet"
    bad.write_bytes(b"not parquet")
    loader = StreamLoader(stream([*files, bad], chars), num_workers=workers)
    running = set(multiprocessing.active_children())
    with pytest.raises(DataError) as caught:
        list(islice(iter(loader), 50))
    assert str(caught.value).startswith(f"{bad}: not a readable Parquet file (") and "\n" not in str(caught.value)
    assert set(multiprocessing.active_children()) <= running
