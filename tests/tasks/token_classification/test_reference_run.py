"""The reference run's checkpoint alone predicts (CoNLL, JSONL tokens or raw text), tags every word of sentences
longer than its windows, decodes within the tag scheme, tests with a per-type report, and exports to transformers'
BertForTokenClassification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import BertForTokenClassification

from tests.cli_runner import checkpoint_command, last_metrics, predictions
from tests.tasks.token_classification.conftest import tagged_sentences, write_conll
from tetraformer.cli.commands import convert_command
from tetraformer.data.tag_schemes import allowed_transitions, entity_spans
from tetraformer.training.checkpointing.loading import load_task_module

Run = tuple[Path, dict[str, Path]]


def valid(tags: list[str], names: list[str], scheme: str) -> bool:
    """Whether a tag sequence keeps to the scheme's allowed start, transitions and end."""
    start, trans, end = allowed_transitions(names, scheme)
    ids = [names.index(t) for t in tags]
    return bool(start[ids[0]] and end[ids[-1]] and all(trans[a, b] for a, b in zip(ids, ids[1:], strict=False)))


def test_the_run_validates_entity_f1_and_token_accuracy(trained_run: Run) -> None:
    """Validation logs entity F1 and token accuracy, each a fraction."""
    metrics = last_metrics(trained_run[0])
    assert 0.0 <= metrics["val/entity_f1"] <= 1.0 and 0.0 <= metrics["val/token_acc"] <= 1.0, metrics


def test_predict_from_checkpoint_alone_reads_conll_jsonl_and_text(
    trained_run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """CoNLL, JSONL (fields kept) and raw text in; one tag per word and the entities they spell out; a sentence per
    line read as CoNLL is refused in one line."""
    ckpt = trained_run[0] / "checkpoints" / "last.ckpt"
    gold = tagged_sentences(6, 5)
    conll = predictions(ckpt, write_conll(tmp_path / "p.conll", gold), tmp_path / "p1")
    assert [r["tokens"] for r in conll] == [[w for w, _ in s] for s in gold]
    assert [len(r["predicted"]) for r in conll] == [len(s) for s in gold]
    for record in conll:
        assert [(e["type"], e["start"], e["end"]) for e in record["entities"]] == entity_spans(
            record["predicted"], "IOB2"
        )
        assert all(e["text"] == " ".join(record["tokens"][e["start"] : e["end"]]) for e in record["entities"])
    rows = [{"id": i, "tokens": [w for w, _ in s], "tags": [t for _, t in s]} for i, s in enumerate(gold)]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    jsonl = predictions(ckpt, tmp_path / "p.jsonl", tmp_path / "p2")
    assert [r["id"] for r in jsonl] == list(range(6)) and [r["predicted"] for r in jsonl] == [
        r["predicted"] for r in conll
    ]
    assert [r["tags"] for r in jsonl] == [r["tags"] for r in rows]  # the input's gold tags stay beside the prediction
    (tmp_path / "p.txt").write_text("we met anna smith in oslo\n\nthe boris went to lima today\n", encoding="utf-8")
    text = predictions(ckpt, tmp_path / "p.txt", tmp_path / "p3", "--data.format", "text")
    assert [r["text"] for r in text] == ["we met anna smith in oslo", "the boris went to lima today"]
    assert [len(r["predicted"]) for r in text] == [6, 6]
    with pytest.raises(SystemExit) as refused:  # without --data.format text the .txt is CoNLL: its line 1 is no token
        predictions(ckpt, tmp_path / "p.txt", tmp_path / "p4")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert refused.value.code == 2 and line.startswith(
        f"error: {tmp_path / 'p.txt'}:1: line 'we met anna smith in oslo'"
    )
    assert line.endswith("set --data.format text")


def test_sentences_longer_than_a_window_get_one_tag_per_word(trained_run: Run, tmp_path: Path) -> None:
    """Sentences of 60-80 words, more than one 48-token window each, come back with exactly one tag per word."""
    gold = tagged_sentences(4, 7, length=(60, 80))
    out = predictions(
        trained_run[0] / "checkpoints" / "last.ckpt", write_conll(tmp_path / "long.conll", gold), tmp_path
    )
    assert [len(r["predicted"]) for r in out] == [len(s) for s in gold]


def test_constrained_decoding_never_emits_an_invalid_transition(trained_run: Run, tmp_path: Path) -> None:
    """On random word scores argmax breaks the scheme; Viterbi over allowed transitions never does, nor does
    `predict --model.decode constrained`."""
    run, files = trained_run
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
    out = predictions(ckpt, files["test"], tmp_path / "p", "--model.decode", "constrained")
    assert all(valid(r["predicted"], names, "IOB2") for r in out)


@pytest.mark.parametrize("strict", [False, True])
def test_test_stage_writes_per_type_report(trained_run: Run, tmp_path: Path, strict: bool) -> None:
    """`test` writes ROOT/eval/test-N/reports/test_entities.csv/.md: a row per entity type, then micro, macro avg."""
    run, files = trained_run
    strict_scheme = ("--model.strict_scheme", str(strict).lower())
    tested = checkpoint_command(
        "test",
        run / "checkpoints" / "last.ckpt",
        tmp_path / "t",
        "--data.test_path",
        str(files["test"]),
        *strict_scheme,
    )
    lines = (tested / "reports" / "test_entities.csv").read_text().splitlines()
    assert lines[0] == "type,precision,recall,f1,support"
    assert [line.split(",")[0] for line in lines[1:]] == ["LOC", "PER", "micro avg", "macro avg"]
    assert (tested / "reports" / "test_entities.md").is_file()


def test_export_round_trips_logits_and_tags(trained_run: Run, tmp_path: Path) -> None:
    """transformers' BertForTokenClassification on the exported directory gives our logits and tag names."""
    ckpt = trained_run[0] / "checkpoints" / "last.ckpt"
    convert_command(["to-hf", str(ckpt), str(tmp_path / "hf_out")])
    module = load_task_module(ckpt)
    hf = BertForTokenClassification.from_pretrained(tmp_path / "hf_out").eval()
    assert hf.config.id2label == dict(enumerate(["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]))
    batch = dict(
        module.tokenizer(["we met anna smith in oslo", "boris went to lima", "the"], padding=True, return_tensors="pt")
    )
    mask = batch["attention_mask"].bool()
    ours = module.net(batch["input_ids"], attention_mask=mask, token_type_ids=torch.zeros_like(batch["input_ids"]))
    theirs = hf(**batch).logits
    torch.testing.assert_close(ours[mask], theirs[mask], atol=1e-5, rtol=1e-5)
