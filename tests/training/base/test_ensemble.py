"""--model.ensemble's check, and the pooling of members' class scores."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tetraformer.errors import ConfigError
from tetraformer.training.base.ensemble import check_ensemble, pooled_log_probs


def task(**options: object) -> SimpleNamespace:
    """A stand-in for a TaskModule's loading and adapting options."""
    lora = SimpleNamespace(cfg=SimpleNamespace(enabled=bool(options.get("lora"))))
    return SimpleNamespace(init_from=options.get("init_from"), lora=lora, word_vectors=options.get("word_vectors"))


def test_sizes_and_clashes() -> None:
    assert check_ensemble(1, task(init_from="x.ckpt")) == 1  # one network may start from anything
    assert check_ensemble(4, task()) == 4
    for bad in (0, -2, 2.5, True, "3"):
        with pytest.raises(ConfigError, match="whole number of heads"):
            check_ensemble(bad, task(), "heads")
    for clash in ("init_from", "lora", "word_vectors"):
        with pytest.raises(ConfigError, match=f"--model.ensemble 3 trains heads from scratch; drop --model.{clash}"):
            check_ensemble(3, task(**{clash: "on"}), "heads")


def test_pooled_log_probs() -> None:
    logits = torch.randn(3, 4, 5)  # (K, B, C)
    alone = logits[:1]
    assert torch.equal(pooled_log_probs(alone), logits[0])  # one member: its logits as they are
    pooled = pooled_log_probs(logits)
    torch.testing.assert_close(pooled, logits.log_softmax(-1).mean(0))
    geometric = logits.softmax(-1).prod(0) ** (1 / 3)  # the members' geometric mean, normalised
    torch.testing.assert_close(pooled.softmax(-1), geometric / geometric.sum(-1, keepdim=True))
