"""A TaskModule's LoRA run: adapters put on the network it builds, and checkpoints of adapters or merged weights."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from torch import nn

from tetraformer.core.config import TransformerConfig
from tetraformer.core.lora import LoRAConfig, apply_lora, lora_layers, merged_state, parameter_counts, strip_lora
from tetraformer.errors import ConfigError, TetraformerError
from tetraformer.payload import NETWORK_PREFIX, PAYLOAD_KEY, plain

log = logging.getLogger(__name__)
LORA_KEY = "lora"  # in the payload: {"config": LoRAConfig fields, "base": the init_from the adapters refer to}


class LoRARun:
    """The `--model.lora.*` settings of a task module and what they do to its network and checkpoints."""

    def __init__(self, cfg: LoRAConfig | dict[str, Any] | None) -> None:
        self.cfg = LoRAConfig(**cfg) if isinstance(cfg, dict) else cfg or LoRAConfig()

    def check_base(self, init_from: str | None) -> None:
        """Adapters are saved with a reference to the weights they adapt: a LoRA run that saves them needs a base,
        `--model.init_from` (checked when the module is built, before the data is read)."""
        if self.cfg.enabled and self.cfg.save == "adapters" and not init_from:
            raise ConfigError(
                f"--model.lora.rank {self.cfg.rank} adapts a pretrained network, and --model.init_from is not set: "
                "set --model.init_from to the checkpoint or Hugging Face folder to adapt (adapters on a network "
                "from scratch: --model.lora.save merged)"
            )

    def adapt(self, module: Any, net: nn.Module) -> None:
        """Freeze the network and put adapters on the targeted layers (a fresh task head trains in full)."""
        if not self.cfg.enabled:
            return
        self.check_base(module.init_from)
        names = apply_lora(net, self.cfg)
        for name in module.fresh_parts if module.lora_trains_head else ():
            part = getattr(net, name, None)
            if isinstance(part, nn.Module) and name not in self.cfg.targets:
                part.requires_grad_(True)  # a part the base never had (a classifier): nothing to adapt
        trainable, total = parameter_counts(net)
        log.info(
            "LoRA rank %d (alpha %g) on %d layers (%s): %s trainable of %s parameters (%.2f%%)",
            self.cfg.rank,
            self.cfg.alpha,
            len(names),
            ", ".join(self.cfg.targets),
            f"{trainable:,}",
            f"{total:,}",
            100 * trainable / total,
        )

    def save(self, module: Any, checkpoint: dict[str, Any]) -> None:
        """Keep only the trained tensors and a reference to the base, or the merged weights of a plain network."""
        net = module.net
        if not any(True for _ in lora_layers(net)):
            return
        state = checkpoint["state_dict"]
        if self.cfg.save == "merged":
            for key in [k for k in state if k.startswith(NETWORK_PREFIX)]:
                del state[key]
            state.update({NETWORK_PREFIX + k: v for k, v in merged_state(net).items()})
            return
        frozen = {n for n, p in net.named_parameters(remove_duplicate=False) if not p.requires_grad}
        for name in frozen:
            state.pop(NETWORK_PREFIX + name, None)
        base = str(Path(module.init_from).resolve())
        checkpoint[PAYLOAD_KEY][LORA_KEY] = {"config": plain(self.cfg), "base": base}

    @staticmethod
    def stored_network(module: Any, payload: dict[str, Any]) -> nn.Module | None:
        """The base network with adapters that a checkpoint of adapters describes; None for other checkpoints."""
        stored = payload.get(LORA_KEY)
        if not stored:
            return None
        cfg = TransformerConfig.from_dict(payload["model_config"])
        if not Path(stored["base"]).exists():
            raise TetraformerError(
                f"this checkpoint holds LoRA adapters of the base {stored['base']}, which is not there any more: "
                "put the base back at that path"
            )
        net = module.base_network(cfg, stored["base"])
        apply_lora(net, LoRAConfig(**stored["config"]))
        return net

    @staticmethod
    def load(module: Any, checkpoint: dict[str, Any]) -> None:
        """Complete an adapters checkpoint with the base's tensors; fit a merged one into a plain network."""
        adapted = any(True for _ in lora_layers(module.net))
        if not adapted:
            return
        state = checkpoint["state_dict"]
        if checkpoint[PAYLOAD_KEY].get(LORA_KEY):
            for key, tensor in module.net.state_dict().items():
                state.setdefault(NETWORK_PREFIX + key, tensor)
            return
        trainer = module._trainer
        if trainer is not None and trainer.state.fn == "fit":
            raise TetraformerError(
                "the checkpoint holds merged LoRA weights (--model.lora.save merged), which cannot resume a LoRA run: "
                "start a new run from it with --model.init_from"
            )
        strip_lora(module.net)  # evaluating a merged checkpoint: the plain network takes its weights
