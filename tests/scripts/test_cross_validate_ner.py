"""K-fold cross-validation of NER taggers (scripts/cross_validate_ner.py): folds that score every sentence once,
documents kept whole, paired differences, and a Transformer config learning the tagging fixture in every fold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

import cross_validate_ner as cv
import pytest
import yaml

from tests.tasks.token_classification.conftest import tagged_sentences, tiny_config, write_conll


def units(n: int) -> list[cv.Unit]:
    """n one-sentence units, each told apart by its single word."""
    return [[([f"w{i}"], ["O"])] for i in range(n)]


def test_each_unit_is_tested_once_and_splits_are_disjoint() -> None:
    """Over the folds every unit is in exactly one test part; within a fold train, val and test cover all, once."""
    data = units(23)
    folds = cv.make_folds(data, 5, seed=3)
    tested = sorted(u[0][0][0] for fold in folds for u in fold["test"])
    assert tested == sorted(u[0][0][0] for u in data)
    for k, fold in enumerate(folds):
        words = [u[0][0][0] for split in ("train", "val", "test") for u in fold[split]]
        assert sorted(words) == sorted(u[0][0][0] for u in data)
        assert fold["val"] == folds[(k + 1) % 5]["test"]
    assert [len(f["test"]) for f in folds] == [5, 5, 5, 4, 4]


def test_folds_follow_the_split_seed() -> None:
    """The same seed gives the same folds; another seed, other ones."""
    data = units(30)
    assert cv.make_folds(data, 3, 0) == cv.make_folds(data, 3, 0)
    assert cv.make_folds(data, 3, 0) != cv.make_folds(data, 3, 1)


@pytest.mark.parametrize("folds", [2, 11])
def test_fold_count_out_of_range_is_refused(folds: int) -> None:
    """Fewer than 3 folds (no train part) or more folds than units is a clear error."""
    with pytest.raises(ValueError, match="--folds must be between 3 and the number of units"):
        cv.make_folds(units(10), folds, 0)


def test_bad_input_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tag outside the scheme names the file and line; too many folds say how many units there are."""
    bad = tmp_path / "bad.conll"
    bad.write_text("anna B-PER\nrome L-LOC\n\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"error: .*bad\.conll:2.*L-LOC"):
        cv.main(["--data", str(bad), "--out", str(tmp_path / "cv")])
    with pytest.raises(SystemExit, match=r"error: .*bad\.conll:2.*L-LOC"):  # documents are checked too
        cv.main(["--data", str(bad), "--out", str(tmp_path / "cv"), "--unit", "document"])
    good = write_conll(tmp_path / "good.conll", tagged_sentences(5, seed=1))
    with pytest.raises(SystemExit, match="between 3 and the number of units \\(5\\), got 10"):
        cv.main(["--data", str(good), "--out", str(tmp_path / "cv")])
    with pytest.raises(SystemExit, match="--tag_scheme BIOES: only IOB2 files"):
        cv.main(["--data", str(good), "--out", str(tmp_path / "cv"), "--tag_scheme", "BIOES"])


def test_a_failed_fit_names_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Transformer fit that fails (here: no such config) ends the script with one line naming the fit's log.

    The child is a stand-in that fails at once as `tetraformer fit` would, its words in the log: the script's
    handling is the property; real children run in test_transformer_config_learns_in_every_fold."""
    started: list[list[str]] = []

    def failing_child(command: list[str], stdout: IO[str], **_: object) -> int:
        started.append(command)
        stdout.write("error: no such config\n")
        return 2

    monkeypatch.setattr(cv.subprocess, "call", failing_child)
    corpus = write_conll(tmp_path / "all.conll", tagged_sentences(30, seed=2))
    args = ["--data", str(corpus), "--folds", "3", "--out", str(tmp_path / "cv"), "--baselines", "perceptron"]
    with pytest.raises(
        SystemExit, match=r"error: tetraformer fit failed \(exit 2\); see .*fold0/tagger_seed0/fit\.log"
    ):
        cv.main([*args, "--config", str(tmp_path / "missing.yaml")])
    assert not (tmp_path / "cv" / "fold0" / "tagger_seed0" / "fit.done").exists()
    assert "error: no such config" in (tmp_path / "cv" / "fold0" / "tagger_seed0" / "fit.log").read_text()
    assert started[0][1:6] == ["-m", "tetraformer.cli", "fit", "-c", str(tmp_path / "missing.yaml")]


def test_documents_stay_whole_and_round_trip(tmp_path: Path) -> None:
    """`--unit document` folds whole -DOCSTART- documents, and written folds read back as the same sentences."""
    text = "-DOCSTART- O\n\na B-PER\nb O\n\nc O\n\n-DOCSTART- O\n\nd B-LOC\n\n"
    source = tmp_path / "docs.conll"
    source.write_text(text, encoding="utf-8")
    documents = cv.read_units([source], "IOB2", "document")
    assert documents == [[(["a", "b"], ["B-PER", "O"]), (["c"], ["O"])], [(["d"], ["B-LOC"])]]
    assert len(cv.read_units([source], "IOB2", "sentence")) == 3
    written = tmp_path / "out.conll"
    cv.write_units(written, documents, documents=True)
    assert cv.read_units([written], "IOB2", "document") == documents


def test_fit_reads_the_folds_files_as_iob2(tmp_path: Path) -> None:
    """The fit command names the fold's three files, its run and seed, and reads IOB2 after the user's options."""
    command = cv.fit_command(tmp_path / "run", tmp_path, Path("c.yaml"), 3, ["--data.init_args.tag_scheme=BIOES"])
    assert command[:3] == ["fit", "-c", "c.yaml"]
    assert f"--data.init_args.test_path={tmp_path / 'test.conll'}" in command
    assert "--seed_everything=3" in command and f"--trainer.default_root_dir={tmp_path / 'run'}" in command
    assert command[-1] == "--data.init_args.tag_scheme=IOB2"


def test_fold_field_names_the_folds_folder(tmp_path: Path) -> None:
    """`{fold}` in a passed option becomes the fold's folder, in every fold its own."""
    option = "--data.init_args.vocab_paths=[{fold}/val.conll,{fold}/test.conll]"
    for k in (0, 1):
        command = cv.fit_command(tmp_path / "run", tmp_path / f"fold{k}", Path("c.yaml"), 0, [option])
        assert f"--data.init_args.vocab_paths=[{tmp_path}/fold{k}/val.conll,{tmp_path}/fold{k}/test.conll]" in command


def test_paired_difference() -> None:
    """The per-fold difference's mean, standard error and wins."""
    summary = {"a": {"folds": [0.5, 0.6, 0.7]}, "b": {"folds": [0.4, 0.6, 0.5]}}
    result = cv.paired(summary, "a", "b")
    assert result["mean"] == pytest.approx(0.1)
    assert result["sem"] == pytest.approx(0.1 / 3**0.5)
    assert (result["wins"], result["folds"]) == (2, 3)


def test_baseline_scores_every_entity(tmp_path: Path) -> None:
    """The perceptron's pooled report counts every gold entity of the corpus once and learns the fixture."""
    corpus = write_conll(tmp_path / "all.conll", tagged_sentences(300, seed=5))
    out = tmp_path / "cv"
    cv.main(["--data", str(corpus), "--folds", "3", "--out", str(out), "--baselines", "perceptron"])
    result = json.loads((out / "results.json").read_text())
    gold = sum(tag.startswith("B-") for line in corpus.read_text().splitlines() for tag in line.split()[1:])
    assert result["models"]["perceptron"]["pooled"]["entities"] == gold
    assert result["models"]["perceptron"]["pooled"]["f1"] > 0.8
    assert (out / "fold2" / "test.conll").is_file()
    assert "perceptron" in (out / "results.md").read_text()


@pytest.mark.slow  # `tetraformer fit` per fold in child processes
@pytest.mark.learning
def test_transformer_config_learns_in_every_fold(tmp_path: Path) -> None:
    """A tiny tagger config, fitted and asked to predict in child processes per fold, learns the fixture; a rerun
    reuses the finished runs."""
    corpus = write_conll(tmp_path / "all.conll", tagged_sentences(480, seed=6))
    config = tiny_config(tmp_path / "unused")
    config["trainer"].pop("default_root_dir")
    path = tmp_path / "tagger.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "cv"
    args = ["--data", str(corpus), "--folds", "3", "--out", str(out), "--baselines", "perceptron"]
    cv.main([*args, "--config", str(path), "--jobs", "2"])
    result = json.loads((out / "results.json").read_text())
    tagger = result["models"]["tagger seed 0 (best)"]
    assert tagger["pooled"]["f1"] > 0.8, tagger
    assert min(tagger["folds"]) > 0.7, tagger
    assert set(result["paired"]) == {"tagger seed 0 (best) - perceptron"}
    stamps = sorted(p.stat().st_mtime_ns for p in out.glob("fold*/tagger_seed0/checkpoints/best.ckpt"))
    cv.main([*args, "--config", str(path), "--checkpoints", "best", "last"])
    assert sorted(p.stat().st_mtime_ns for p in out.glob("fold*/tagger_seed0/checkpoints/best.ckpt")) == stamps
    last = json.loads((out / "results.json").read_text())["models"]["tagger seed 0 (last)"]
    assert last["pooled"]["entities"] == tagger["pooled"]["entities"] and last["pooled"]["f1"] > 0.8, last
