"""A TaskModule's LoRA run: adapters put on the network it builds (or read from a PEFT folder), and checkpoints of
adapters or merged weights.

An adapter checkpoint names its base by path and by content: an XXH3-128 checksum of the base's weight files (a
.ckpt's bytes; a folder's weights, their index and config.json), read once per run: 0.011 s for a 100 MiB folder in
the page cache on a busy 2-core AMD EPYC. A base found moved (the recorded path gone) is taken from
`--model.init_from`; a base whose content differs from the recorded one is refused, naming both paths.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from torch import nn

from tetraformer.core.config import TransformerConfig
from tetraformer.core.lora import LoRAConfig, apply_lora, lora_layers, merged_state, parameter_counts, strip_lora
from tetraformer.data.store_integrity import file_checksum, new_hash
from tetraformer.errors import ConfigError, TetraformerError
from tetraformer.payload import NETWORK_PREFIX, PAYLOAD_KEY, plain

log = logging.getLogger(__name__)
LORA_KEY = "lora"  # in the payload: {"config": LoRAConfig fields, "base": its path, "base_hash": base_checksum}
# what reads --model.lora.adapters, named by string as the payload names its starting points: training imports no
# model-format code; read_peft(net, folder, LoRAConfig) -> an object with `config` and `load_into(net)`
ADAPTER_READER = "tetraformer.interop.peft_import:read_peft"
BASE_FILES = ("*.safetensors", "*.bin", "*.index.json", "config.json", "*.ckpt", "*.pt", "*.pth")  # a folder's weights


def base_checksum(path: str | Path) -> str:
    """XXH3-128 of a base's weights: a file's bytes, or each weight file of a folder (BASE_FILES) by name."""
    path = Path(path)
    digest = new_hash()
    files = [path] if path.is_file() else sorted({p for pattern in BASE_FILES for p in path.glob(pattern)})
    for file in files:
        name = "" if file == path else file.name  # a renamed .ckpt is the same base; a folder's names are its layout
        digest.update(f"{name}:{file_checksum(file)}\n".encode())
    return digest.hexdigest()


class LoRARun:
    """The `--model.lora.*` settings of a task module and what they do to its network and checkpoints."""

    def __init__(self, cfg: LoRAConfig | dict[str, Any] | None) -> None:
        self.cfg = LoRAConfig(**cfg) if isinstance(cfg, dict) else cfg or LoRAConfig()
        self._checksums: dict[Path, str] = {}  # base path -> base_checksum, each read once
        self._checked = False  # whether stored_network built the network on a checked base

    def check_base(self, init_from: str | None) -> None:
        """Adapters are saved with a reference to the weights they adapt: a LoRA run that saves them needs a base,
        `--model.init_from` (checked when the module is built, before the data is read)."""
        if self.cfg.adapters and not init_from:
            raise ConfigError(
                f"--model.lora.adapters {self.cfg.adapters} adapts the model it was trained on, and --model.init_from "
                "is not set: set --model.init_from to that base (its Hugging Face folder or checkpoint)"
            )
        if self.cfg.enabled and self.cfg.save == "adapters" and not init_from:
            raise ConfigError(
                f"--model.lora.rank {self.cfg.rank} adapts a pretrained network, and --model.init_from is not set: "
                "set --model.init_from to the checkpoint or Hugging Face folder to adapt (adapters on a network "
                "from scratch: --model.lora.save merged)"
            )

    def adapt(self, module: Any, net: nn.Module) -> None:
        """Freeze the network and put adapters on the targeted layers (a fresh task head trains in full); with
        --model.lora.adapters, the PEFT folder's adapters and settings."""
        if not self.cfg.enabled:
            return
        self.check_base(module.init_from)
        adapters = self._read_adapters(net) if self.cfg.adapters else None
        if adapters is not None:
            self.cfg = adapters.config
        names = apply_lora(net, self.cfg)
        train_fresh_parts(module, net, self.cfg)
        if adapters is not None:
            adapters.load_into(net)
        trainable, total = parameter_counts(net)
        variant = "".join(f", {v}" for v in ("rslora", "dora") if getattr(self.cfg, v))
        log.info(
            "LoRA rank %d (alpha %g%s) on %d layers (%s): %s trainable of %s parameters (%.2f%%)",
            self.cfg.rank,
            self.cfg.alpha,
            variant,
            len(names),
            ", ".join(self.cfg.targets),
            f"{trainable:,}",
            f"{total:,}",
            100 * trainable / total,
        )

    def _read_adapters(self, net: nn.Module) -> Any:
        """The --model.lora.adapters folder read for this network (ADAPTER_READER)."""
        module, attribute = ADAPTER_READER.split(":")
        return getattr(importlib.import_module(module), attribute)(net, self.cfg.adapters, self.cfg)

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
        base = Path(module.init_from).resolve()
        checkpoint[PAYLOAD_KEY][LORA_KEY] = {"config": plain(self.cfg), "base": str(base), "base_hash": self.hash(base)}

    def hash(self, base: Path) -> str | None:
        """The base's content checksum (None when it is not there to read), read once per path."""
        base = base.resolve()
        if base not in self._checksums and base.exists():
            self._checksums[base] = base_checksum(base)
        return self._checksums.get(base)

    def stored_network(self, module: Any, payload: dict[str, Any]) -> nn.Module | None:
        """The base network with adapters that a checkpoint of adapters describes; None for other checkpoints."""
        stored = payload.get(LORA_KEY)
        if not stored:
            return None
        base = self.found_base(stored, module.init_from)
        net = module.base_network(TransformerConfig.from_dict(payload["model_config"]), str(base))
        cfg = LoRAConfig(**stored["config"])
        apply_lora(net, cfg)
        train_fresh_parts(module, net, cfg)  # as in the run: what trained in full shows (convert to-peft writes it)
        return net

    def found_base(self, stored: dict[str, Any], init_from: str | None) -> Path:
        """The base of a checkpoint's adapters: its recorded path, else (moved) --model.init_from; checked to hold
        the recorded content."""
        recorded = Path(stored["base"])
        base = recorded if recorded.exists() else Path(init_from) if init_from and Path(init_from).exists() else None
        if base is None:
            raise TetraformerError(
                f"this checkpoint holds LoRA adapters of the base {recorded}, which is not there any more: put the "
                "base back at that path, or give its new place with --model.init_from NEW_PATH (fit, validate, test, "
                "predict; generate, convert and evaluate read the recorded path)"
            )
        self.check_hash(stored, base)
        self._checked = True
        if base != recorded:
            log.info("LoRA base %s moved: found at %s (--model.init_from), with the recorded content", recorded, base)
        return base

    def check_hash(self, stored: dict[str, Any], base: Path) -> None:
        """Refuse a base whose content is not the recorded one; an older checkpoint without a hash is said to load
        unchecked."""
        recorded = stored.get("base_hash")
        if recorded is None:
            log.info(
                "this checkpoint records no content hash of its LoRA base (it predates them): %s is used unchecked",
                base,
            )
            return
        if self.hash(base) != recorded:
            raise TetraformerError(
                f"{base} is not the base these LoRA adapters were trained on ({stored['base']}): its weights differ "
                "(content hash); give --model.init_from the base they were trained on"
            )

    def load(self, module: Any, checkpoint: dict[str, Any]) -> None:
        """Complete an adapters checkpoint with the base's tensors (the base checked against the recorded one); fit
        a merged one into a plain network."""
        adapted = any(True for _ in lora_layers(module.net))
        if not adapted:
            return
        state = checkpoint["state_dict"]
        stored = checkpoint[PAYLOAD_KEY].get(LORA_KEY)
        if stored:
            if not self._checked and module.init_from:  # the network was built from init_from: is it the base?
                self.check_hash(stored, Path(module.init_from))
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


def train_fresh_parts(module: Any, net: nn.Module, cfg: LoRAConfig) -> None:
    """Parts the base never had (a classifier) train in full under LoRA: nothing there to adapt."""
    for name in module.fresh_parts if module.lora_trains_head else ():
        part = getattr(net, name, None)
        if isinstance(part, nn.Module) and name not in cfg.targets:
            part.requires_grad_(True)
