"""Tetraformer's training beside a plain `transformers` loop: the same model, data, batches, schedule and steps.

For each family (BERT on Reuters R8, GPT on Shakespeare characters, T5 on German->English dictionary pairs, ViT on
a Fashion-MNIST subset) one config is written; `tetraformer prepare` trains its tokenizer and builds its stores once.
Each seed then runs `tetraformer fit` (ours) and a plain loop over the matching `transformers` class (HF), one
process each, one thread each, both at once so load on a shared machine hits them alike (--one-at-a-time: in turn);
hf_side_by_side_runs.py holds both sides and the scoring. The table shows the validation metric (mean ± std over
seeds) and the training loop's wall and CPU seconds (medians): CPU seconds are the steadier on a busy machine.

    tetraformer demo-data gutenberg reuters dictionary fashion_mnist      # data/...
    python scripts/hf_side_by_side.py                       # 4 families x 3 seeds, HF with its own init
    python scripts/hf_side_by_side.py --families t5 --init ours    # HF starts from our initial weights
    python scripts/hf_side_by_side.py --families bert --size smoke --seeds 1      # seconds: a check it runs
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from studies_common import ROOT, child_env

from tetraformer.accel.chooser import cpu_model

SCRIPTS = Path(__file__).resolve().parent
FAMILIES = ("bert", "gpt", "t5", "vit")
METRIC = {"bert": "accuracy", "gpt": "loss", "t5": "loss", "vit": "accuracy"}
SIZES: dict[str, dict[str, Any]] = {  # steps, warm-up, validation batches (0: all), images per class (ViT)
    "full": dict(steps=200, warmup=20, val_batches=0, train_images=500, val_images=100),
    "smoke": dict(steps=3, warmup=1, val_batches=2, train_images=4, val_images=2),
}
OPTIM = dict(weight_decay=0.01, betas=[0.9, 0.999], eps=1.0e-8, schedule="cosine", min_lr_ratio=0.0)


def arch(**fields: Any) -> dict[str, Any]:
    """A small core shape (d_model 128, 4 heads, FFN 512) with the family's fields."""
    return {"d_model": 128, "n_heads": 4, "d_ff": 512, **fields}


def family_parts(family: str, data: Path, work: Path, size: dict[str, Any]) -> tuple[str, dict, str, dict]:
    """(task module class_path, its init_args, datamodule class_path, its init_args) of one family."""
    bert_like = dict(norm="layernorm", norm_position="post", embedding_norm=True, position="learned")
    if family == "bert":
        model = dict(pooling="cls", pooler=True, arch=arch(n_layers=2, max_len=128, dropout=0.1, **bert_like))
        reuters = {f"{s}_path": str(data / f"reuters/{s}.csv") for s in ("train", "val")}
        options = dict(tokenizer_type="wordpiece", vocab_size=8000, max_length=128, batch_size=32, **reuters)
        return (
            "text_classification.module.TextClassification",
            model,
            "text_classification.data.TextClassificationData",
            options,
        )
    if family == "gpt":
        shape = arch(n_layers=3, max_len=128, dropout=0.0, position="learned", activation="gelu_tanh", bias=True)
        model = dict(arch=shape, sample_prompts=[])
        text = {f"{s}_path": str(data / f"shakespeare/{s}.txt") for s in ("train", "val")}
        options = dict(tokenizer_type="char", block_size=128, batch_size=16, **text)
        return (
            "language_modeling.module.LanguageModeling",
            model,
            "language_modeling.data.LanguageModelingData",
            options,
        )
    if family == "t5":
        t5 = dict(norm="rmsnorm", norm_position="pre", norm_eps=1.0e-6, position="relative", bias=False)
        shape = arch(n_layers=2, n_decoder_layers=2, max_len=64, dropout=0.1, activation="geglu_tanh", **t5)
        model = dict(arch={**shape, "tie_embeddings": True}, metrics=[], val_generate_batches=0)
        pairs = {f"{s}_path": str(data / f"de_en/{s}.jsonl") for s in ("train", "val")}
        lengths = dict(max_source_length=32, max_target_length=32)
        options = dict(tokenizer_type="unigram", vocab_size=4000, batch_size=32, **lengths, **pairs)
        return "seq2seq.module.Seq2Seq", model, "seq2seq.data.Seq2SeqData", options
    shape = arch(n_layers=4, image_size=28, patch_size=4, position="learned", dropout=0.0)
    model = dict(pooling="cls", arch=shape, attention_images=0)
    folders = image_subset(data / "fashion_mnist", work / "fashion_mnist", size)
    options = dict(channels=1, batch_size=64, **folders)
    return (
        "image_classification.module.ImageClassification",
        model,
        "image_classification.data.ImageClassificationData",
        options,
    )


def image_subset(source: Path, out: Path, size: dict[str, Any]) -> dict[str, str]:
    """Train/val folders of links to the first images of each class: train from train/, val from test/."""
    for split, origin, per_class in (("train", "train", size["train_images"]), ("val", "test", size["val_images"])):
        for label in sorted(p for p in (source / origin).iterdir() if p.is_dir()):
            folder = out / split / label.name
            folder.mkdir(parents=True, exist_ok=True)
            for image in sorted(label.iterdir())[:per_class]:
                link = folder / image.name
                if not link.exists():
                    link.symlink_to(image.resolve())
    return {"train_path": str(out / "train"), "val_path": str(out / "val")}


def write_config(family: str, data: Path, work: Path, size: dict[str, Any]) -> Path:
    """One family's fit config: fp32 on the CPU, no validation during the fit, clipping at 1.0, no checkpoints."""
    model_class, model, data_class, options = family_parts(family, data, work, size)
    lr = 2.0e-3 if family == "gpt" else 1.0e-3
    model["optim"] = {"lr": lr, "warmup_steps": size["warmup"], **OPTIM}
    trainer = dict(
        accelerator="cpu",
        devices=1,
        precision="32-true",
        max_steps=size["steps"],
        gradient_clip_val=1.0,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
        log_every_n_steps=50,
        default_root_dir=str(work / f"prepare-{family}"),
    )
    config = {
        "seed_everything": 0,
        "trainer": trainer,
        "model": {"class_path": f"tasks.{model_class}", "init_args": model},
        "data": {"class_path": f"tasks.{data_class}", "init_args": options},
        "run": {"wandb": "disabled"},
    }
    path = work / f"{family}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def prepare_stores(config: Path, env: dict[str, str]) -> None:
    """`tetraformer prepare -c CONFIG` in a child process."""
    command = [sys.executable, "-m", "tetraformer.cli", "prepare", "-c", str(config)]
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def prepare(config: Path, env: dict[str, str]) -> None:
    """`tetraformer prepare`: the run tokenizer and stores, once; the config then names that tokenizer."""
    settings = yaml.safe_load(config.read_text())
    prepare_stores(config, env)
    tokenizer = Path(settings["trainer"]["default_root_dir"]) / "tokenizer"
    if tokenizer.exists():
        settings["data"]["init_args"]["tokenizer"] = str(tokenizer)
        config.write_text(yaml.safe_dump(settings))


Run = tuple[str, int]  # a side and a seed


def run_children(runs: list[Run], family: str, config: Path, options: list[str], env: dict) -> list[dict]:
    """Each (side, seed) run in a child process, all started together (one thread each): their JSON records."""
    children = []
    for side, seed in runs:
        out = config.parent / f"{family}-{side}-{seed}.json"
        command = [sys.executable, str(SCRIPTS / "hf_side_by_side_runs.py"), side, family, str(config), str(seed)]
        with out.with_suffix(".log").open("w") as log:
            child = subprocess.Popen([*command, str(out), *options], env=env, stdout=log, stderr=subprocess.STDOUT)
        children.append((side, seed, out, child))
    for side, seed, out, child in children:
        if child.wait() != 0:
            raise RuntimeError(f"{side} {family} seed {seed} failed; see {out.with_suffix('.log')}")
    return [json.loads(out.read_text()) for *_, out, _ in children]


def run_groups(args: argparse.Namespace) -> list[list[Run]]:
    """Which runs start together: both sides of a seed (--one-at-a-time: one run, HF first on odd seeds), and with
    --seeds-together the seeds too."""
    pairs = [[("ours", s), ("hf", s)] if s % 2 == 0 else [("hf", s), ("ours", s)] for s in range(args.seeds)]
    if args.one_at_a_time:
        return [[run] for pair in pairs for run in pair]
    if args.seeds_together:
        return [[run for pair in pairs for run in pair]]
    return pairs


def runs_env(work: Path) -> dict[str, str]:
    """studies_common's child environment with a cache shared by the runs (unless one is set)."""
    env = child_env()
    env.setdefault("TETRAFORMER_CACHE_DIR", str(work / "cache"))
    return env


Results = dict[str, dict[str, list[dict]]]  # family -> side -> one record per seed


def measure(args: argparse.Namespace, work: Path) -> Results:
    """Every family's runs, prepared once, then in the groups `run_groups` makes: ours and HF side by side at the
    same time by default, so load on the machine hits both alike."""
    size, env = SIZES[args.size], runs_env(work)
    options = [str(size["val_batches"]), args.init]
    results: Results = {}
    for family in args.families:
        config = write_config(family, args.data, work, size)
        prepare(config, env)
        results[family] = {"ours": [], "hf": []}
        for group in run_groups(args):
            for (side, seed), record in zip(group, run_children(group, family, config, options, env), strict=True):
                results[family][side].append(record)
                print(f"{family} seed {seed} {side}: {record}", file=sys.stderr, flush=True)
    return results


def spread(values: list[float], digits: int) -> str:
    """mean ± std (std 0 for one value)."""
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.{digits}f} ± {std:.{digits}f}"


def table(results: Results) -> str:
    """Markdown: per family, both sides' metric, then median training-loop wall and CPU seconds and ours/HF of each."""
    header = (
        "| family | metric | ours | HF | wall s ours | wall s HF | ours/HF wall | CPU s ours | CPU s HF | ours/HF CPU |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    for family, sides in results.items():
        metric = METRIC[family]
        digits = 4 if metric == "accuracy" else 3
        ours, hf = ([r[metric] for r in sides[s]] for s in ("ours", "hf"))
        row = [family, f"val {metric}", spread(ours, digits), spread(hf, digits)]
        for clock in ("wall_s", "cpu_s"):
            mine, theirs = (statistics.median(r[clock] for r in sides[s]) for s in ("ours", "hf"))
            row += [f"{mine:.1f}", f"{theirs:.1f}", f"{mine / theirs:.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Families, seeds, size, data folder, work folder."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="prepared data (tetraformer demo-data)")
    parser.add_argument("--work", type=Path, default=None, help="configs, logs and records (default: a temp dir)")
    parser.add_argument("--init", choices=["hf", "ours"], default="hf", help="HF's own init, or our initial weights")
    parser.add_argument("--one-at-a-time", action="store_true", help="run the two sides in turn, not together")
    parser.add_argument("--seeds-together", action="store_true", help="start every seed's two runs at once")
    parser.add_argument("--json", type=Path, default=None, help="also write every run's record here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> Results:
    """Measure, print the table (stdout) with the CPU, and return the records."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = measure(args, work)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(table(results))
    steps = SIZES[args.size]["steps"]
    together = "in turn" if args.one_at_a_time else "all seeds at once" if args.seeds_together else "sides together"
    print(
        f"\nCPU: {cpu_model()}; a thread per run; {args.seeds} seed(s); {steps} steps; HF init {args.init}; {together}"
    )
    return results


if __name__ == "__main__":
    main()
