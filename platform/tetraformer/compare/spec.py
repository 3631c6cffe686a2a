"""The comparison file: a base config, its variants (override sets and/or a grid), seeds and one budget."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from tetraformer.compare.evaluation import EvaluateSpec, evaluate_spec
from tetraformer.errors import ConfigError

BUDGET_KEYS = ("max_steps", "max_time", "tokens")
SPEC_KEYS = (
    *("base", "overrides", "variants", "grid", "seeds", "budget", "test", "extrapolation", "peak_tflops"),
    "evaluate",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")


@dataclass(frozen=True)
class Budget:
    """What every run of a comparison gets, exactly one of: optimizer steps, wall time or training tokens."""

    max_steps: int | None = None
    max_time: str | None = None  # DD:HH:MM:SS or HH:MM:SS, as --trainer.max_time takes it
    tokens: int | None = None  # training tokens (or images); a callback stops each run there

    def describe(self) -> str:
        """`max_steps=400`: the budget in one phrase."""
        key = next(k for k in BUDGET_KEYS if getattr(self, k) is not None)
        return f"{key}={getattr(self, key)}"


@dataclass(frozen=True)
class Variant:
    """One named set of config overrides (dotted keys as on the command line)."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ComparisonSpec:
    """A parsed comparison file: every variant runs with every seed on the same base config and budget."""

    name: str  # the file's stem: the W&B group and the default output folder's name
    path: Path
    base: Path
    variants: list[Variant]
    seeds: list[int]
    budget: Budget
    test: bool = False
    extrapolation: list[int] | None = None
    peak_tflops: float | Literal["auto"] = "auto"  # auto: each run times its device's matmul peak at start
    shared: dict[str, Any] = field(default_factory=dict)  # overrides of every run (data paths, model size)
    evaluate: EvaluateSpec | None = None  # lm-eval tasks each run's final checkpoint is scored on


def load_spec(
    path: Path,
    budget: dict[str, Any] | None = None,
    seeds: int | None = None,
    overrides: dict[str, Any] | None = None,
) -> ComparisonSpec:
    """Read and check a comparison file; `budget` / `seeds` (command-line flags) replace the file's, `overrides`
    (command-line `--dotted.key value`) are laid over the file's shared `overrides`."""
    if not path.is_file():
        raise ConfigError(f"{path}: comparison file not found")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with 'base' and 'variants' and/or 'grid'")
    unknown = sorted(set(data) - set(SPEC_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key '{unknown[0]}' (known: {', '.join(SPEC_KEYS)})")
    found = variants(path, data.get("variants"), data.get("grid"))
    return ComparisonSpec(
        name=path.stem,
        path=path,
        base=base_config(path, data.get("base")),
        variants=found,
        seeds=seed_list(path, data.get("seeds", 1) if seeds is None else seeds),
        budget=parse_budget(path, budget if budget else data.get("budget")),
        test=bool(data.get("test", False)),
        extrapolation=extrapolation_factors(path, data.get("extrapolation")),
        peak_tflops=peak(path, data.get("peak_tflops", "auto")),
        shared=shared_overrides(path, data.get("overrides"), overrides or {}, found),
        evaluate=evaluate_spec(path, data.get("evaluate")),
    )


def base_config(path: Path, base: Any) -> Path:
    """The base config, relative to the comparison file or else to the working directory."""
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: 'base' must name a config file (e.g. base: configs/task/NAME.yaml)")
    for candidate in (path.parent / base, Path(base)):
        if candidate.is_file():
            return candidate
    raise ConfigError(f"{path}: base config '{base}' not found (relative to {path.parent} or the cwd)")


def variants(path: Path, listed: Any, grid: Any) -> list[Variant]:
    """The named variants, each crossed with the grid's points when both are given; names must be unique."""
    if listed is None and grid is None:
        raise ConfigError(f"{path}: no variants: give 'variants' (a list of {{name, overrides}}) and/or 'grid'")
    named = named_variants(path, listed) if listed is not None else []
    points = grid_variants(path, grid) if grid is not None else []
    result = (
        [Variant(f"{v.name},{p.name}", {**v.overrides, **p.overrides}) for v, p in itertools.product(named, points)]
        or named
        or points
    )
    seen: set[str] = set()
    for variant in result:
        if variant.name in seen:
            raise ConfigError(f"{path}: variants: duplicate variant name '{variant.name}'")
        seen.add(variant.name)
    return result


def shared_overrides(path: Path, listed: Any, flags: dict[str, Any], found: list[Variant]) -> dict[str, Any]:
    """The overrides of every run: the file's `overrides`, then the command line's; a key that a variant sets too is
    an error (shared, it would make the variants the same, or be lost under the variant's own)."""
    shared = listed or {}
    if not isinstance(shared, dict):
        raise ConfigError(f"{path}: overrides: expected a mapping of dotted keys to values (shared by every variant)")
    shared = {**shared, **flags}
    for variant in found:
        for key in shared:
            clash = next((own for own in variant.overrides if _same_option(key, own)), None)
            if clash is not None:
                raise ConfigError(
                    f"{path}: the shared override {key} is also variant '{variant.name}''s {clash}: "
                    "a key the comparison varies cannot be shared (drop one of them)"
                )
    return shared


def _same_option(a: str, b: str) -> bool:
    """Whether two dotted keys name the same option or one holds the other (`init_args.` spelled or not)."""
    a, b = (k.replace(".init_args.", ".") for k in (a, b))
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def named_variants(path: Path, listed: Any) -> list[Variant]:
    """`variants: [{name, overrides: {dotted.key: value}}]`, checked."""
    if not isinstance(listed, list) or not listed:
        raise ConfigError(f"{path}: variants: expected a non-empty list of {{name, overrides}}")
    result = []
    for number, item in enumerate(listed, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ConfigError(f"{path}: variants[{number}]: expected a mapping with a 'name'")
        overrides = item.get("overrides") or {}
        if not isinstance(overrides, dict):
            raise ConfigError(
                f"{path}: variants[{number}] ({item['name']}): 'overrides' must map dotted keys to values"
            )
        if _UNSAFE.search(item["name"]):
            raise ConfigError(f"{path}: variants[{number}]: name '{item['name']}' must be letters, digits, . _ = -")
        result.append(Variant(item["name"], dict(overrides)))
    return result


def grid_variants(path: Path, grid: Any) -> list[Variant]:
    """`grid: {dotted.key: [v1, v2]}`: the product of the values, named `lastkey=value,lastkey=value`."""
    if not isinstance(grid, dict) or not grid:
        raise ConfigError(f"{path}: grid: expected a mapping of dotted keys to lists of values")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{path}: grid.{key}: expected a non-empty list of values, got {values!r}")
    keys = list(grid)
    result = []
    for values in itertools.product(*(grid[k] for k in keys)):
        name = ",".join(  # "," never occurs in a key, so `norm_position=pre,norm=layernorm` reads unambiguously
            f"{k.rsplit('.', 1)[-1]}={_UNSAFE.sub('-', str(v))}" for k, v in zip(keys, values, strict=True)
        )
        result.append(Variant(name, dict(zip(keys, values, strict=True))))
    return result


def seed_list(path: Path, seeds: Any) -> list[int]:
    """`seeds: 3` means seeds 0, 1, 2; a list gives them explicitly."""
    if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds > 0:
        return list(range(seeds))
    if isinstance(seeds, list) and seeds and all(isinstance(s, int) for s in seeds):
        return list(seeds)
    raise ConfigError(f"{path}: seeds: expected a positive count or a list of integers, got {seeds!r}")


def parse_budget(path: Path, budget: Any) -> Budget:
    """Exactly one of max_steps, max_time, tokens."""
    if not isinstance(budget, dict):
        raise ConfigError(f"{path}: budget: expected one of {', '.join(BUDGET_KEYS)} (e.g. budget: {{max_steps: 500}})")
    unknown = sorted(set(budget) - set(BUDGET_KEYS))
    if unknown:
        raise ConfigError(f"{path}: budget.{unknown[0]}: unknown budget (known: {', '.join(BUDGET_KEYS)})")
    given = [k for k in BUDGET_KEYS if budget.get(k) is not None]
    if len(given) != 1:
        raise ConfigError(
            f"{path}: budget: give exactly one of {', '.join(BUDGET_KEYS)} (got {', '.join(given) or 'none'})"
        )
    key = given[0]
    value = budget[key]
    if key == "max_time":
        if not isinstance(value, str) or not re.fullmatch(r"(\d+:)?\d+:\d+:\d+", value):
            raise ConfigError(f"{path}: budget.max_time: expected HH:MM:SS or DD:HH:MM:SS, got {value!r}")
    elif not _positive_int(value):
        raise ConfigError(f"{path}: budget.{key}: expected a positive integer, got {value!r}")
    return Budget(**{key: value})


def extrapolation_factors(path: Path, factors: Any) -> list[int] | None:
    """`extrapolation: [1, 2, 4]`: positive whole multiples of the training length."""
    if factors is None:
        return None
    if not isinstance(factors, list) or not factors or not all(_positive_int(f) for f in factors):
        raise ConfigError(
            f"{path}: extrapolation: expected a list of positive integers like [1, 2, 4], got {factors!r}"
        )
    return factors


def peak(path: Path, value: Any) -> float | Literal["auto"]:
    """`auto` (each run measures its device's matmul peak; also when unset) or a positive number of TFLOP/s."""
    if value in ("auto", None):
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{path}: peak_tflops: expected a positive number or auto, got {value!r}")
    return float(value)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
