"""K-fold cross-validation of NER taggers on CoNLL files: the CRF and averaged-perceptron baselines and a
Transformer config, each scored on every sentence exactly once.

A test split of 50 sentences (about 100 entities) moves one model's entity F1 by about +-0.05; pooling K folds
scores every sentence of the corpus, and the per-fold differences between two models are paired.

python scripts/cross_validate_ner.py --data data/ner_ja/*.conll --folds 10 --out runs/cv_ner_ja \
    --config configs/token_classification/ner_ja_finetune.yaml --seeds 0 1 --jobs 2 \
    --model.init_args.init_from runs/masked_lm_ja_manuals/checkpoints/last.ckpt

Fold k tests on part k of a seeded permutation of the sentences (or documents, `--unit document`), validates
(checkpoint choice) on part k+1 and trains on the rest. Options the script does not know go to `tetraformer fit`;
`{fold}` in them stands for the fold's folder of CoNLL files (e.g. `--data.init_args.vocab_paths
[{fold}/val.conll,{fold}/test.conll]`: the words of the fold's unlabelled text join its tokenizer).
Each run keeps its directory under OUT/fold<k>/, so a rerun reuses the folds already done. Writes
OUT/results.md and OUT/results.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from baselines_common import Tagged, entity_scores, fit_tagger, predict_tags, read_tagged, tagged_sentences
from studies_common import child_env

from tetraformer.data import DataError
from tetraformer.data.tag_schemes import canonical_scheme
from tetraformer.demo_data.formats import write_conll, write_conll_documents

FOLD_FIELD = "{fold}"  # in an option passed to `tetraformer fit`: the fold's folder of CoNLL files
Unit = list[Tagged]  # one sentence, or a document's sentences
Fold = dict[str, list[Unit]]  # train / val / test


def read_units(paths: Sequence[Path], scheme: str, unit: str) -> list[Unit]:
    """The files' sentences as folding units: each sentence alone, or each (file, -DOCSTART- document) together."""
    if unit == "sentence":
        return [[sentence] for path in paths for sentence in read_tagged(path, scheme)]
    groups: dict[tuple[Path, int], Unit] = {}
    for path in paths:
        for sentence, tagged in tagged_sentences(path, scheme):
            groups.setdefault((path, sentence.document), []).append(tagged)
    return list(groups.values())


def make_folds(units: Sequence[Unit], folds: int, seed: int) -> list[Fold]:
    """K folds of a seeded permutation: fold k tests on part k, validates on part k+1, trains on the others."""
    if not 3 <= folds <= len(units):
        raise ValueError(f"--folds must be between 3 and the number of units ({len(units)}), got {folds}")
    order = np.random.default_rng(seed).permutation(len(units))
    parts = [[units[i] for i in part] for part in np.array_split(order, folds)]
    result = []
    for k in range(folds):
        held = {k, (k + 1) % folds}
        train = [u for j, part in enumerate(parts) if j not in held for u in part]
        result.append({"train": train, "val": parts[(k + 1) % folds], "test": parts[k]})
    return result


def write_units(path: Path, units: Sequence[Unit], documents: bool) -> None:
    """CoNLL word<TAB>tag lines (IOB2), a blank line after each sentence, `-DOCSTART-` before each document."""
    pairs = [[list(zip(words, tags, strict=True)) for words, tags in unit] for unit in units]
    if documents:
        write_conll_documents(path, pairs)
    else:
        write_conll(path, [sentence for unit in pairs for sentence in unit])


def sentences(units: Sequence[Unit]) -> list[Tagged]:
    """The units' sentences, in order."""
    return [sentence for unit in units for sentence in unit]


def baseline_tags(fold: Fold, model: str) -> list[list[str]]:
    """A baseline fitted on the fold's training sentences: its tags for the test sentences."""
    tagger = fit_tagger(sentences(fold["train"]), model)
    return predict_tags(tagger, [w for w, _ in sentences(fold["test"])])


def tetraformer(args: list[str], log: Path) -> None:
    """One `tetraformer` command in a child process, its output appended to `log`; a failure names the log."""
    with log.open("a") as out:
        code = subprocess.call(
            [sys.executable, "-m", "tetraformer.cli", *args], env=child_env(), stdout=out, stderr=out
        )
    if code != 0:
        raise RuntimeError(f"tetraformer {args[0]} failed (exit {code}); see {log}")


def fit_command(run: Path, data: Path, config: Path, seed: int, overrides: list[str]) -> list[str]:
    """`tetraformer fit` arguments for one fold: its files, run directory and seed, then the user's options with
    `{fold}` made the fold's folder; the files are read as IOB2, the scheme they are written in, whatever the
    source's."""
    paths = [f"--data.init_args.{s}_path={data / f'{s}.conll'}" for s in ("train", "val", "test")]
    fit = ["fit", "-c", str(config), *paths, f"--trainer.default_root_dir={run}", f"--seed_everything={seed}"]
    options = [option.replace(FOLD_FIELD, str(data)) for option in overrides]
    return [*fit, "--run.wandb=disabled", *options, "--data.init_args.tag_scheme=IOB2"]


def fit_fold(run: Path, data: Path, config: Path, seed: int, overrides: list[str]) -> None:
    """`tetraformer fit` on the fold's files in `data` into `run`, unless a finished fit is there (`fit.done`)."""
    if (run / "fit.done").is_file():
        return
    run.mkdir(parents=True, exist_ok=True)
    tetraformer(fit_command(run, data, config, seed, overrides), run / "fit.log")
    (run / "fit.done").touch()


def predicted_tags(run: Path, data: Path, checkpoint: str) -> list[list[str]]:
    """The tags `tetraformer predict` gives the fold's test file from `run/checkpoints/CHECKPOINT.ckpt` (kept in
    `run/predict_CHECKPOINT/`, which a rerun reads again)."""
    out, test = run / f"predict_{checkpoint}", data / "test.conll"
    if not list(out.glob("eval/predict-*/predictions.jsonl")):
        ckpt = run / "checkpoints" / f"{checkpoint}.ckpt"
        predict = ["predict", f"--ckpt_path={ckpt}", f"--data.predict_path={test}", f"--trainer.default_root_dir={out}"]
        tetraformer([*predict, "--run.wandb=disabled"], run / "predict.log")
    found = max(out.glob("eval/predict-*/predictions.jsonl"), key=lambda path: path.stat().st_mtime_ns)
    rows = [json.loads(line) for line in found.read_text(encoding="utf-8").splitlines() if line.strip()]
    if [len(r["predicted"]) for r in rows] != [len(w) for w, _ in read_tagged(test)]:
        raise RuntimeError(f"{found} does not tag the words of {test} one to one")
    return [row["predicted"] for row in rows]


def tagger_tags(fold_dir: Path, config: Path, seed: int, overrides: list[str], checkpoints: Sequence[str]) -> dict:
    """Fit the config on one fold with one seed; each checkpoint's predicted tags for the fold's test file."""
    run = fold_dir / f"tagger_seed{seed}"
    fit_fold(run, fold_dir, config, seed, overrides)
    return {checkpoint: predicted_tags(run, fold_dir, checkpoint) for checkpoint in checkpoints}


def micro(true: Sequence[list[str]], predicted: Sequence[list[str]]) -> dict[str, float]:
    """Micro entity precision, recall and F1 (the task's metric) of predicted against true tags."""
    row = next(r for r in entity_scores(true, predicted) if r[0] == "micro avg")
    return {"precision": float(row[1]), "recall": float(row[2]), "f1": float(row[3]), "entities": int(row[4])}


def summarise(gold: list[list[list[str]]], predictions: dict[str, list[list[list[str]]]]) -> dict[str, dict]:
    """Per model: its F1 on each fold, and pooled over all folds (every sentence once)."""
    summary = {}
    for name, folds in predictions.items():
        per_fold = [micro(g, p)["f1"] for g, p in zip(gold, folds, strict=True)]
        pooled = micro([t for g in gold for t in g], [t for p in folds for t in p])
        summary[name] = {"pooled": pooled, "folds": per_fold, "mean": float(np.mean(per_fold))}
        summary[name]["std"] = float(np.std(per_fold, ddof=1))
    return summary


def paired(summary: dict[str, dict], model: str, baseline: str) -> dict[str, float]:
    """The per-fold difference model - baseline: its mean, standard error and the folds the model wins."""
    diff = np.array(summary[model]["folds"]) - np.array(summary[baseline]["folds"])
    sem = float(np.std(diff, ddof=1) / math.sqrt(len(diff)))
    return {"mean": float(diff.mean()), "sem": sem, "wins": int((diff > 0).sum()), "folds": len(diff)}


def report(summary: dict[str, dict], comparisons: dict[str, dict], args: argparse.Namespace) -> str:
    """The results as Markdown: pooled scores, per-fold scores and paired differences."""
    lines = [f"# {args.folds}-fold cross-validation of {' '.join(map(str, args.data))}", ""]
    lines += [
        "| model | pooled precision | pooled recall | **pooled F1** | fold F1 mean (sd) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, s in summary.items():
        p = s["pooled"]
        lines.append(
            f"| {name} | {p['precision']:.3f} | {p['recall']:.3f} | **{p['f1']:.3f}** | "
            f"{s['mean']:.3f} ({s['std']:.3f}) |"
        )
    entities = next(iter(summary.values()))["pooled"]["entities"]
    lines += ["", f"Pooled over {entities} entities; per fold:", "", "| fold | " + " | ".join(summary) + " |"]
    lines.append("|---:|" + "---:|" * len(summary))
    for k in range(args.folds):
        lines.append(f"| {k} | " + " | ".join(f"{s['folds'][k]:.3f}" for s in summary.values()) + " |")
    lines += ["", "| model - baseline, per fold | mean | standard error | folds won |", "|---|---:|---:|---:|"]
    for name, c in comparisons.items():
        lines.append(f"| {name} | {c['mean']:+.3f} | {c['sem']:.3f} | {c['wins']} of {c['folds']} |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The script's options, and the rest for `tetraformer fit`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", required=True, help="CoNLL files, pooled before folding")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--split_seed", type=int, default=0, help="seed of the permutation that makes the folds")
    parser.add_argument("--unit", choices=["sentence", "document"], default="sentence")
    parser.add_argument("--tag_scheme", default="IOB2", help="the files' scheme: IOB2, or IOB1 (converted to IOB2)")
    parser.add_argument("--baselines", nargs="*", choices=["crf", "perceptron"], default=["crf", "perceptron"])
    parser.add_argument("--config", type=Path, help="a token-classification config: the Transformer to compare")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="the Transformer's seeds")
    parser.add_argument("--jobs", type=int, default=1, help="Transformer runs at once, one thread each")
    parser.add_argument("--checkpoints", nargs="+", choices=["best", "last"], default=["best"], help="to score")
    return parser.parse_known_args(argv)


def tagger_predictions(args: argparse.Namespace, overrides: list[str]) -> dict[str, list[list[list[str]]]]:
    """The Transformer's test tags on every fold, per seed and checkpoint, `--jobs` fits at a time."""
    jobs = [(k, seed) for seed in args.seeds for k in range(args.folds)]

    def run(job: tuple[int, int]) -> dict[str, list[list[str]]]:
        return tagger_tags(args.out / f"fold{job[0]}", args.config, job[1], overrides, args.checkpoints)

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        done = dict(zip(jobs, pool.map(run, jobs), strict=True))
    return {
        f"tagger seed {seed} ({checkpoint})": [done[k, seed][checkpoint] for k in range(args.folds)]
        for seed, checkpoint in itertools.product(args.seeds, args.checkpoints)
    }


def main(argv: list[str] | None = None) -> None:
    """Make the folds, run every model on each, write and print the report."""
    args, overrides = parse_args(argv)
    if canonical_scheme(args.tag_scheme) != "IOB2":
        sys.exit(f"error: --tag_scheme {args.tag_scheme}: only IOB2 files (or IOB1, converted) are cross-validated")
    try:
        folds = make_folds(read_units(args.data, args.tag_scheme, args.unit), args.folds, args.split_seed)
    except (DataError, ValueError) as err:  # a bad file (named with its line) or fold count: one line, no traceback
        sys.exit(f"error: {err}")
    for k, fold in enumerate(folds):
        for split, units in fold.items():
            write_units(args.out / f"fold{k}" / f"{split}.conll", units, args.unit == "document")
    gold = [[tags for _, tags in sentences(fold["test"])] for fold in folds]
    predictions = {name: [baseline_tags(fold, name) for fold in folds] for name in args.baselines}
    if args.config is not None:
        try:
            predictions.update(tagger_predictions(args, overrides))
        except RuntimeError as err:  # a fit or predict that failed: its log says why; finished folds are kept
            sys.exit(f"error: {err}")
    summary = summarise(gold, predictions)
    base = args.baselines[0] if args.baselines else None
    comparisons = {f"{m} - {base}": paired(summary, m, base) for m in summary if base and m != base}
    text = report(summary, comparisons, args)
    (args.out / "results.md").write_text(text, encoding="utf-8")
    (args.out / "results.json").write_text(json.dumps({"models": summary, "paired": comparisons}, indent=1))
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
