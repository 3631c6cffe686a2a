"""Predict from the checkpoint alone (CoNLL, JSONL tokens or raw text), long sentences, constrained decoding."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.tasks.token_classification.conftest import tagged_sentences, write_conll
from tetraformer.cli import main
from tetraformer.data.tag_schemes import allowed_transitions, entity_spans
from tetraformer.training.checkpointing.loading import load_task_module


def predict(ckpt: Path, data: Path, out: Path, *args: str) -> list[dict]:
    """`tetraformer predict` with only the checkpoint and a file; the JSONL records it writes."""
    main(
        [
            "predict",
            "--ckpt_path",
            str(ckpt),
            "--data.predict_path",
            str(data),
            "--run.wandb",
            "disabled",
            "--trainer.default_root_dir",
            str(out),
            *args,
        ]
    )
    written = out / "eval" / "predict-1" / "predictions.jsonl"
    return [json.loads(line) for line in written.read_text(encoding="utf-8").splitlines()]


def valid(tags: list[str], names: list[str], scheme: str) -> bool:
    """Whether a tag sequence keeps to the scheme's allowed start, transitions and end."""
    start, trans, end = allowed_transitions(names, scheme)
    ids = [names.index(t) for t in tags]
    return bool(start[ids[0]] and end[ids[-1]] and all(trans[a, b] for a, b in zip(ids, ids[1:], strict=False)))


@pytest.mark.learning
def test_predict_from_checkpoint_alone_gives_entities(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CoNLL, JSONL (fields kept) and raw text in; one tag per word and the entities they spell out; a sentence per
    line read as CoNLL is refused in one line."""
    run = run_cli("fit", train_path=str(splits["train"]), val_path=str(splits["val"]))
    ckpt = run / "checkpoints" / "last.ckpt"
    gold = tagged_sentences(6, 5)
    conll = predict(ckpt, write_conll(tmp_path / "p.conll", gold), tmp_path / "p1")
    assert [r["tokens"] for r in conll] == [[w for w, _ in s] for s in gold]
    hits = sum(r["predicted"] == [t for _, t in s] for r, s in zip(conll, gold, strict=True))
    assert hits >= 5, conll
    for record in conll:
        assert [(e["type"], e["start"], e["end"]) for e in record["entities"]] == entity_spans(
            record["predicted"], "IOB2"
        )
        assert all(e["text"] == " ".join(record["tokens"][e["start"] : e["end"]]) for e in record["entities"])
    rows = [{"id": i, "tokens": [w for w, _ in s], "tags": [t for _, t in s]} for i, s in enumerate(gold)]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    jsonl = predict(ckpt, tmp_path / "p.jsonl", tmp_path / "p2")
    assert [r["id"] for r in jsonl] == list(range(6)) and [r["predicted"] for r in jsonl] == [
        r["predicted"] for r in conll
    ]
    assert [r["tags"] for r in jsonl] == [r["tags"] for r in rows]  # the input's gold tags stay beside the prediction
    (tmp_path / "p.txt").write_text("we met anna smith in oslo\n\nthe boris went to lima today\n", encoding="utf-8")
    text = predict(ckpt, tmp_path / "p.txt", tmp_path / "p3", "--data.format", "text")
    assert [r["text"] for r in text] == ["we met anna smith in oslo", "the boris went to lima today"]
    assert {(e["type"], e["text"]) for r in text for e in r["entities"]} >= {("PER", "anna smith"), ("LOC", "oslo")}
    with pytest.raises(SystemExit) as refused:  # without --data.format text the .txt is CoNLL: its line 1 is no token
        predict(ckpt, tmp_path / "p.txt", tmp_path / "p4")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert refused.value.code == 2 and line.startswith(
        f"error: {tmp_path / 'p.txt'}:1: line 'we met anna smith in oslo'"
    )
    assert line.endswith("set --data.format text")


@pytest.mark.learning
def test_long_sentences_get_one_tag_per_word(run_cli: Callable[..., Path], tmp_path: Path) -> None:
    """With windows much shorter than the sentences, every word still gets one tag and the tagger still learns."""
    train = write_conll(tmp_path / "train.conll", tagged_sentences(240, 0, length=(8, 14)))
    val = write_conll(tmp_path / "val.conll", tagged_sentences(30, 1, length=(8, 14)))
    # 12-token windows learn slower than whole sentences: after the default 7 epochs 3 seeds in 14 typed 0.64-0.82
    # of the entity words right; after 14 epochs all 14 typed every one right
    epochs = ("--trainer.max_epochs", "14")
    run = run_cli("fit", *epochs, train_path=str(train), val_path=str(val), max_length=12, stride=4)
    gold = tagged_sentences(4, 7, length=(30, 40))
    out = predict(run / "checkpoints" / "last.ckpt", write_conll(tmp_path / "long.conll", gold), tmp_path / "p")
    assert [len(r["predicted"]) for r in out] == [len(s) for s in gold]
    pairs = [(p, t) for r, s in zip(out, gold, strict=True) for p, (_, t) in zip(r["predicted"], s, strict=True)]
    entity_words = [(p, t) for p, t in pairs if t != "O"]  # all-O output would score 0 here
    assert sum(p[2:] == t[2:] for p, t in entity_words) / len(entity_words) > 0.8, out  # the entity type


def test_constrained_decoding_never_emits_an_invalid_transition(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path
) -> None:
    """On an undertrained tagger, argmax breaks the scheme; Viterbi over allowed transitions never does."""
    run = run_cli("fit", "--trainer.max_steps", "2", train_path=str(splits["train"]), val_path=str(splits["val"]))
    ckpt = run / "checkpoints" / "last.ckpt"
    module = load_task_module(ckpt)
    names = module.vocabulary.names
    scores = torch.randn(64, 12, len(names)).log_softmax(-1)  # (S, W, L)
    mask = torch.arange(12)[None] < torch.randint(1, 13, (64, 1))  # (S, W) prefixes
    lengths = mask.sum(1).tolist()
    argmax = module.decode_words(scores, mask)
    assert not all(
        valid([names[i] for i in row[:n]], names, "IOB2") for row, n in zip(argmax.tolist(), lengths, strict=True)
    )
    module.decode = "constrained"
    constrained = module.decode_words(scores, mask)
    assert (constrained == -100).equal(~mask)
    assert all(
        valid([names[i] for i in row[:n]], names, "IOB2") for row, n in zip(constrained.tolist(), lengths, strict=True)
    )
    out = predict(ckpt, splits["test"], tmp_path / "p", "--model.decode", "constrained")
    assert all(valid(r["predicted"], names, "IOB2") for r in out)


@pytest.mark.parametrize("strict", [False, True])
def test_test_stage_writes_per_type_report(
    run_cli: Callable[..., Path], splits: dict[str, Path], tmp_path: Path, strict: bool
) -> None:
    """`test` writes ROOT/eval/test-N/reports/test_entities.csv/.md: a row per entity type, then micro, macro avg."""
    run = run_cli("fit", "--trainer.max_epochs", "1", train_path=str(splits["train"]), val_path=str(splits["val"]))
    main(
        [
            "test",
            "--ckpt_path",
            str(run / "checkpoints" / "last.ckpt"),
            "--data.test_path",
            str(splits["test"]),
            "--model.strict_scheme",
            str(strict).lower(),
            "--run.wandb",
            "disabled",
            "--trainer.default_root_dir",
            str(tmp_path / "t"),
        ]
    )
    reports = tmp_path / "t" / "eval" / "test-1" / "reports"
    lines = (reports / "test_entities.csv").read_text().splitlines()
    assert lines[0] == "type,precision,recall,f1,support"
    assert [line.split(",")[0] for line in lines[1:]] == ["LOC", "PER", "micro avg", "macro avg"]
    assert (reports / "test_entities.md").is_file()
