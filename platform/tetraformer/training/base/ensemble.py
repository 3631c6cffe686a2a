"""`--model.ensemble`: its check, and the pooling of K members' class scores."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from tetraformer.errors import ConfigError


def check_ensemble(ensemble: int, task: Any, members: str = "networks") -> int:
    """The ensemble size, refused below 1 or beside options that load or adapt one network (`init_from`, `lora`,
    `word_vectors`); `members` names what the task ensembles in the message."""
    if not isinstance(ensemble, int) or isinstance(ensemble, bool) or ensemble < 1:
        raise ConfigError(f"--model.ensemble {ensemble!r}; expected a whole number of {members}, 1 or more")
    if ensemble > 1:
        clashes = {
            "init_from": task.init_from,
            "lora": task.lora.cfg.enabled,
            "word_vectors": getattr(task, "word_vectors", None),
        }
        named = [f"--model.{name}" for name, value in clashes.items() if value]
        if named:
            raise ConfigError(f"--model.ensemble {ensemble} trains {members} from scratch; drop {', '.join(named)}")
    return ensemble


def pooled_log_probs(logits: Tensor) -> Tensor:
    """(K, ..., C) members' logits -> (..., C) scores whose argmax is the ensemble's class: a lone member's logits
    as they are, else the mean of the members' log-probabilities (a product of experts; its softmax is their
    normalised geometric mean)."""
    return logits[0] if logits.shape[0] == 1 else logits.log_softmax(-1).mean(0)
