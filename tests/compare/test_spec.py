"""The comparison file: variants, grid products, seeds, budgets, and a one-line error for each mistake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tetraformer.compare.spec import Budget, load_spec
from tetraformer.errors import ConfigError


def write_spec(tmp_path: Path, **fields: Any) -> Path:
    """A comparison file next to an (empty) base config, with these fields over a valid minimum."""
    (tmp_path / "base.yaml").write_text("trainer: {}\n")
    data = {"base": "base.yaml", "variants": [{"name": "a"}], "budget": {"max_steps": 10}, **fields}
    path = tmp_path / "cmp.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    return path


def test_named_variants_seeds_and_budget(tmp_path: Path) -> None:
    """Named override sets keep their order; `seeds: 3` is seeds 0, 1, 2; base is next to the file."""
    variants = [{"name": "alibi", "overrides": {"model.arch.position": "alibi"}}, {"name": "rope"}]
    spec = load_spec(write_spec(tmp_path, variants=variants, seeds=3, test=True))
    assert [v.name for v in spec.variants] == ["alibi", "rope"]
    assert spec.variants[0].overrides == {"model.arch.position": "alibi"}
    assert spec.seeds == [0, 1, 2] and spec.budget == Budget(max_steps=10) and spec.test
    assert spec.base == tmp_path / "base.yaml" and spec.name == "cmp"


def test_grid_is_a_product_named_by_values(tmp_path: Path) -> None:
    """A grid gives one variant per combination, named by the last key segment and the value."""
    grid = {"model.arch.norm": ["layernorm", "rmsnorm"], "model.arch.norm_position": ["pre", "post"]}
    spec = load_spec(write_spec(tmp_path, variants=None, grid=grid))
    assert len(spec.variants) == 4
    assert spec.variants[0].name == "norm=layernorm,norm_position=pre"
    assert spec.variants[3].overrides == {"model.arch.norm": "rmsnorm", "model.arch.norm_position": "post"}


def test_variants_cross_the_grid(tmp_path: Path) -> None:
    """Named variants and a grid together: each variant with each grid point."""
    spec = load_spec(write_spec(tmp_path, variants=[{"name": "a"}, {"name": "b"}], grid={"x.y": [1, 2]}))
    assert [v.name for v in spec.variants] == ["a,y=1", "a,y=2", "b,y=1", "b,y=2"]


def test_flags_replace_the_files_budget_and_seeds(tmp_path: Path) -> None:
    """Command-line --budget.* and --seeds win over the file."""
    spec = load_spec(write_spec(tmp_path, seeds=3), budget={"max_time": "00:01:00"}, seeds=2)
    assert spec.budget == Budget(max_time="00:01:00") and spec.seeds == [0, 1]


def test_shared_overrides_come_from_the_file_and_the_command_line(tmp_path: Path) -> None:
    """`overrides:` in the file applies to every run; command-line ones are laid over it; variants keep their own."""
    variants = [{"name": "small", "overrides": {"model.arch.d_model": 32}}, {"name": "big"}]
    shared = {"data.train_path": "a.csv", "trainer.accumulate_grad_batches": 2}
    spec = load_spec(write_spec(tmp_path, variants=variants, overrides=shared), overrides={"data.train_path": "b.csv"})
    assert spec.shared == {"data.train_path": "b.csv", "trainer.accumulate_grad_batches": 2}
    assert spec.variants[0].overrides == {"model.arch.d_model": 32} and spec.variants[1].overrides == {}


@pytest.mark.parametrize(
    ("shared", "flags"),
    [
        ({"model.init_args.arch.d_model": 64}, {}),
        ({}, {"model.arch": "{d_model: 64}"}),
    ],
)
def test_a_shared_override_of_a_varied_key_is_an_error(
    tmp_path: Path, shared: dict[str, Any], flags: dict[str, Any]
) -> None:
    """Sharing a key a variant sets (spelled with or without init_args, or a section above it) would erase the
    difference the comparison is about, or be lost under the variant's own: one line naming both."""
    variants = [{"name": "small", "overrides": {"model.arch.d_model": 32}}]
    path = write_spec(tmp_path, variants=variants, overrides=shared or None)
    with pytest.raises(ConfigError, match="is also variant 'small''s model.arch.d_model"):
        load_spec(path, overrides=flags)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"base": "missing.yaml"}, "base config 'missing.yaml' not found"),
        ({"variants": [{"name": "a"}, {"name": "a"}]}, "duplicate variant name 'a'"),
        ({"variants": []}, "variants: expected a non-empty list"),
        ({"variants": None}, "no variants"),
        ({"grid": {"model.arch.position": "alibi"}}, "grid.model.arch.position: expected a non-empty list"),
        ({"budget": {}}, "budget: give exactly one of max_steps, max_time, tokens (got none)"),
        ({"budget": {"max_steps": 5, "tokens": 100}}, "(got max_steps, tokens)"),
        ({"budget": {"max_time": "soon"}}, "budget.max_time: expected HH:MM:SS"),
        ({"seeds": 0}, "seeds: expected a positive count"),
        ({"bogus": 1}, "unknown key 'bogus'"),
        ({"extrapolation": [1, "2x"]}, "extrapolation: expected a list of positive integers"),
        ({"peak_tflops": -1}, "peak_tflops: expected a positive number or auto"),
        ({"overrides": ["data.train_path"]}, "overrides: expected a mapping of dotted keys"),
    ],
)
def test_mistakes_are_one_line_errors_naming_file_and_key(tmp_path: Path, fields: dict[str, Any], message: str) -> None:
    """Each mistake is a ConfigError naming the comparison file and what is wrong."""
    path = write_spec(tmp_path, **fields)
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_evaluate_names_tasks_a_folder_beside_the_file_and_options(tmp_path: Path) -> None:
    """`evaluate:` scores each run's final checkpoint: its task names, include_path relative to the comparison file,
    the command's options; each mistake is one line naming the key."""
    (tmp_path / "tasks").mkdir()
    section = {"tasks": ["quiz", "text"], "include_path": "tasks", "limit": 50}
    spec = load_spec(write_spec(tmp_path, evaluate=section))
    assert spec.evaluate is not None and spec.evaluate.tasks == ["quiz", "text"]
    assert spec.evaluate.include_path == (tmp_path / "tasks").resolve() and spec.evaluate.limit == 50
    assert load_spec(write_spec(tmp_path)).evaluate is None
    mistakes = {
        "evaluate: expected a mapping with 'tasks'": {"include_path": "tasks"},
        "evaluate.shots: unknown key": {"tasks": ["quiz"], "shots": 5},
        "evaluate.include_path 'elsewhere' is not a folder": {"tasks": ["quiz"], "include_path": "elsewhere"},
        "evaluate.limit: expected a number": {"tasks": ["quiz"], "limit": "all"},
    }
    for said, wrong in mistakes.items():
        with pytest.raises(ConfigError, match=said):
            load_spec(write_spec(tmp_path, evaluate=wrong))
