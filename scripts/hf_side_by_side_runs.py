"""One side of scripts/hf_side_by_side.py in a process of its own: `tetraformer fit`, or a plain `transformers` loop.

    python scripts/hf_side_by_side_runs.py ours|hf FAMILY CONFIG SEED OUT_JSON [VAL_BATCHES [INIT]]

Both sides read one config (written by hf_side_by_side.py) with `--seed_everything SEED --data.seed 1234+SEED`, so
they train on the same tokenizer's ids, in the same batches, in the same order (the platform's training loaders
shuffle from data.seed alone). Ours is the platform's own fit with a probe callback that times the training loop
(on_train_start to on_train_end) and then scores the validation split; the Hugging Face side builds our DataModule
for its batches, the `transformers` model from the config our network exports as (interop), and trains it in a plain
loop with the optimizer Hugging Face's Trainer builds (fused AdamW, no decay on biases and norms, cosine schedule
with warm-up, clipping). Both score with `evaluate`, the same function on the same validation batches.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from itertools import islice
from pathlib import Path
from typing import Any

import lightning as L
import torch
import yaml
from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn

Batch = dict[str, Any]
LogitsOf = Callable[[Batch], Tensor]
CLASSIFIERS = ("bert", "vit")  # accuracy; the others score mean token cross-entropy (and its perplexity)


# --- the one scoring function ------------------------------------------------------------------------
def targets_of(family: str, batch: Batch) -> Tensor:
    """What the logits predict: class ids (B,), next tokens (B, T) of a GPT block, T5 labels (B, T) (-100 skipped)."""
    return batch["input_ids"][:, 1:] if family == "gpt" else batch["labels"]


def loss_of(family: str, logits: Tensor, batch: Batch) -> Tensor:
    """Mean cross-entropy of (..., C) logits against the batch's targets, -100 skipped."""
    targets = targets_of(family, batch)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


@torch.no_grad()
def evaluate(family: str, logits_of: LogitsOf, batches: Iterable[Batch], max_batches: int | None) -> dict[str, float]:
    """Validation accuracy (classifiers) or token-weighted loss and perplexity (language models)."""
    hits = count = 0
    nll = 0.0
    for batch in islice(batches, max_batches):
        logits = logits_of(batch).float()  # (B, C) or (B, T, V)
        targets = targets_of(family, batch)
        if family in CLASSIFIERS:
            hits += int((logits.argmax(-1) == targets).sum())
            count += targets.numel()
            continue
        flat = targets.reshape(-1)
        nll += float(nn.functional.cross_entropy(logits.reshape(flat.numel(), -1), flat, reduction="sum"))
        count += int((flat != -100).sum())
    if family in CLASSIFIERS:
        return {"accuracy": hits / count}
    return {"loss": nll / count, "perplexity": math.exp(nll / count)}


# --- our side: the platform's own fit --------------------------------------------------------------------
def ours_logits(family: str, module: Any) -> LogitsOf:
    """Our task module's logits for a batch (its forward_batch, or the LM network on the inputs)."""
    if family in CLASSIFIERS:
        return module.forward_batch
    if family == "gpt":
        return lambda b: module.net(b["input_ids"][:, :-1])
    return lambda b: module.net(
        b["input_ids"], b["decoder_input_ids"], b["attention_mask"], b["decoder_attention_mask"]
    )


class SideProbe(Callback):
    """Times the training loop (on_train_start to on_train_end), then scores the validation split into a JSON file."""

    def __init__(self, family: str, out: str, val_batches: int | None = None) -> None:
        self.family, self.out, self.val_batches = family, Path(out), val_batches
        self.start = self.cpu_start = 0.0

    def on_train_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Start the clocks."""
        self.start, self.cpu_start = time.perf_counter(), time.process_time()

    def on_train_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        """Stop the clocks; score the trained module on the validation batches."""
        wall, cpu = time.perf_counter() - self.start, time.process_time() - self.cpu_start
        pl_module.eval()
        loader = trainer.datamodule.val_dataloader()
        scores = evaluate(self.family, ours_logits(self.family, pl_module), loader, self.val_batches)
        pl_module.train()
        record = {"wall_s": wall, "cpu_s": cpu, "steps": trainer.global_step, **scores}
        self.out.write_text(json.dumps(record))


def run_ours(family: str, config: Path, seed: int, out: Path, val_batches: int | None) -> None:
    """`tetraformer fit -c CONFIG` with the probe added, in this process."""
    from tetraformer.cli import main

    settings = yaml.safe_load(config.read_text())
    probe = {"family": family, "out": str(out), "val_batches": val_batches}
    settings["trainer"]["callbacks"] = [{"class_path": "hf_side_by_side_runs.SideProbe", "init_args": probe}]
    settings["trainer"]["default_root_dir"] = str(out.with_suffix(""))
    run_config = out.with_suffix(".yaml")
    run_config.write_text(yaml.safe_dump(settings))
    main(["fit", "-c", str(run_config), *seed_flags(seed)])


def seed_flags(seed: int) -> list[str]:
    """The run's seed: weights and dropout (seed_everything) and batch order (data.seed)."""
    return ["--seed_everything", str(seed), "--data.seed", str(1234 + seed)]


# --- the Hugging Face side: a plain loop -------------------------------------------------------------------
def platform_parts(config: Path, seed: int) -> tuple[Any, Any]:
    """Our (module, datamodule) from the config, the data set up and our network built (its shape is exported)."""
    from tetraformer.cli.lightning_cli import build_cli

    args = ["-c", str(config), *seed_flags(seed), "--trainer.logger=false"]  # no run folder: the loop logs nothing
    cli = build_cli([], "side-by-side", args=args, run=False)
    data, module = cli.datamodule, cli.model
    data.prepare_data()
    data.setup("fit")
    module.use_spec(data.spec())
    module.configure_model()
    return module, data


def hf_model(module: Any, init: str) -> nn.Module:
    """The `transformers` model of the architecture and config.json our network exports as: with Hugging Face's own
    initialisation (init "hf"), or starting from our network's initial weights (init "ours")."""
    import transformers
    from transformers import CONFIG_MAPPING

    from tetraformer.interop import export_class, save_hf
    from tetraformer.interop.convert import label_config, token_config

    net = module.net
    extra = token_config(module.tokenizer, net) if module.tokenizer is not None else {}
    names = module.label_names() if hasattr(module, "label_names") else None
    extra |= label_config(names, False) if names else {}
    wrapper = export_class(net).from_network(net, extra, None)
    hf_config = wrapper.export_config()
    config = CONFIG_MAPPING[hf_config.pop("model_type")](**hf_config)
    model_class = getattr(transformers, wrapper.architecture)
    if init == "hf":
        return model_class(config)
    with tempfile.TemporaryDirectory() as tmp:  # written and read as any exported checkpoint is
        save_hf(wrapper, tmp)
        return model_class.from_pretrained(tmp)


def check_same_start(family: str, model: nn.Module, module: Any, batch: Batch) -> None:
    """With our initial weights, the HF model's logits equal our network's on a batch (dropout off)."""
    model.eval()
    module.eval()
    with torch.no_grad():
        ours, theirs = ours_logits(family, module)(batch), hf_logits(family, model, module)(batch)
    model.train()
    if not torch.allclose(ours, theirs, atol=1e-4, rtol=1e-4):
        raise RuntimeError(f"{family}: HF logits differ from ours at the start by {(ours - theirs).abs().max():.2e}")


def hf_logits(family: str, model: nn.Module, module: Any) -> LogitsOf:
    """The `transformers` model's logits for one of our batches, under Hugging Face's input names."""
    if family == "bert":
        return lambda b: (
            model(
                input_ids=b["input_ids"], attention_mask=b["attention_mask"], token_type_ids=b["token_type_ids"]
            ).logits
        )
    if family == "vit":
        return lambda b: model(pixel_values=module.normalization(b["pixels"])).logits
    if family == "gpt":
        return lambda b: model(input_ids=b["input_ids"][:, :-1]).logits
    return lambda b: (
        model(
            input_ids=b["input_ids"],
            attention_mask=b["attention_mask"],
            decoder_input_ids=b["decoder_input_ids"],
            decoder_attention_mask=b["decoder_attention_mask"],
        ).logits
    )


def hf_optimizer(model: nn.Module, optim: Any, steps: int) -> tuple[torch.optim.Optimizer, Any]:
    """What Hugging Face's Trainer builds: fused AdamW, no decay on biases and norms, cosine decay after a warm-up."""
    from transformers import get_cosine_schedule_with_warmup
    from transformers.trainer_pt_utils import get_parameter_names

    no_decay_names = [r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)", r"_norm(?:$|\.)"]  # Trainer's
    decay = set(get_parameter_names(model, [nn.LayerNorm], no_decay_names))
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in named if n in decay], "weight_decay": optim.weight_decay},
        {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=optim.lr, betas=tuple(optim.betas), eps=optim.eps, fused=True)
    return optimizer, get_cosine_schedule_with_warmup(optimizer, optim.warmup_steps, steps)


def train_hf(family: str, model: nn.Module, module: Any, data: Any, steps: int, clip: float) -> tuple[float, float]:
    """A plain training loop over our DataModule's batches for `steps` steps; its (wall, CPU) seconds."""
    optimizer, schedule = hf_optimizer(model, module.optim, steps)
    logits_of = hf_logits(family, model, module)
    loader = data.train_dataloader()
    model.train()
    start, cpu_start, step, epoch = time.perf_counter(), time.process_time(), 0, 0
    while step < steps:
        loader.sampler.set_epoch(epoch)  # as Lightning does: each epoch's order from data.seed + epoch
        for batch in loader:
            loss = loss_of(family, logits_of(batch), batch)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step == steps:
                break
        epoch += 1
    return time.perf_counter() - start, time.process_time() - cpu_start


def run_hf(family: str, config: Path, seed: int, out: Path, val_batches: int | None, init: str = "hf") -> None:
    """The `transformers` model trained by a plain loop on the config's data, schedule and step count."""
    settings = yaml.safe_load(config.read_text())
    module, data = platform_parts(config, seed)
    torch.manual_seed(seed)
    model = hf_model(module, init)
    if init == "ours":
        check_same_start(family, model, module, next(iter(data.val_dataloader())))
    steps, clip = settings["trainer"]["max_steps"], settings["trainer"]["gradient_clip_val"]
    wall, cpu = train_hf(family, model, module, data, steps, clip)
    model.eval()
    scores = evaluate(family, hf_logits(family, model, module), data.val_dataloader(), val_batches)
    out.write_text(json.dumps({"wall_s": wall, "cpu_s": cpu, "steps": steps, **scores}))


def main(argv: list[str]) -> None:
    """ours|hf FAMILY CONFIG SEED OUT_JSON [VAL_BATCHES [INIT]] (VAL_BATCHES 0: all; INIT hf|ours, for HF)."""
    torch.set_num_threads(1)
    side, family, config, seed, out = argv[:5]
    val_batches = int(argv[5]) if len(argv) > 5 and int(argv[5]) > 0 else None
    if side == "ours":
        run_ours(family, Path(config), int(seed), Path(out), val_batches)
    else:
        run_hf(family, Path(config), int(seed), Path(out), val_batches, argv[6] if len(argv) > 6 else "hf")


if __name__ == "__main__":
    main(sys.argv[1:])
