"""Shared tiny fixtures: seeded, fp32, dropout-free models small enough for 2 CPU cores."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from lightning.pytorch.cli import LightningCLI
from torch import nn

from tests import processes
from tests.cli_runner import TEST_SEED
from tests.worker_groups import GroupScheduling, heaviest_first
from tetraformer.core import CausalLM, ImageEncoder, Seq2SeqLM, TextEncoder, TransformerConfig

TINY: dict[str, Any] = dict(
    d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=100, max_len=64, dropout=0.0, attn_dropout=0.0
)
FAMILIES: dict[str, type[nn.Module]] = {
    "encoder": TextEncoder,
    "causal": CausalLM,
    "seq2seq": Seq2SeqLM,
    "image": ImageEncoder,
}
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "seq2seq": dict(n_decoder_layers=2),
    "image": dict(image_size=32, patch_size=8, vocab_size=0),
}


MADE_CACHE = pytest.StashKey[str]()  # the cache folder this pytest process made (xdist workers inherit the variable)


def pytest_configure(config: pytest.Config) -> None:
    """Keep the bf16 layout cache of test runs (and their subprocesses) out of the user's ~/.cache; run tests and
    their subprocesses on one torch thread."""
    if "TETRAFORMER_CACHE_DIR" not in os.environ:
        os.environ["TETRAFORMER_CACHE_DIR"] = tempfile.mkdtemp(prefix="tetraformer-cache-")
        config.stash[MADE_CACHE] = os.environ["TETRAFORMER_CACHE_DIR"]
    # The tiny test models gain nothing from more threads, and on a busy machine the threads of a process spin
    # waiting for each other: a CLI fit then costs several times the CPU time (8x measured under a load of 10).
    torch.set_num_threads(int(os.environ.setdefault("OMP_NUM_THREADS", "1")))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the cache folder pytest_configure made, so test runs leave nothing in /tmp."""
    made = config.stash.get(MADE_CACHE, None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)


# Fixtures that run the `tetraformer` CLI (a fit, or a command on a checkpoint a fit made): their tests are `slow`.
# The runners of tests/processes.py: a test module that imports one starts the installed script (seconds of imports
# a process), so its tests are `slow` too.
PROCESS_RUNNERS = ("tetraformer", "failing", "killed_after")
FIT_FIXTURES = {"run_cli", "trained", "trained_run", "uninterrupted", "stopped", "nan_run", "compared", "runs"}


# pytest-timeout's limit (pyproject's `timeout`, a hang guard) for tests that start several training processes (the
# distributed ones, and the promise tests' fresh processes, the first of a task also fitting its reference run): on
# a busy 2-core machine their start-up alone takes minutes
DISTRIBUTED_TIMEOUT_S = 900


@pytest.hookimpl(tryfirst=True)  # the marks before `-m` selects by them
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `slow` the tests that run the CLI or several processes (with a longer hang guard for the latter); skip
    tests marked `gpu` without CUDA; order the tests group by group, heaviest first (tests/worker_groups.py)."""
    for item in items:
        if "distributed" in item.keywords or FIT_FIXTURES & set(getattr(item, "fixturenames", ())) or starts(item):
            item.add_marker(pytest.mark.slow)
        several = "distributed" in item.keywords or item.path.parent.name == "promises"
        if several and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DISTRIBUTED_TIMEOUT_S))
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
    items[:] = heaviest_first(items)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> GroupScheduling | None:
    """`-n N --dist loadgroup`: hand out whole groups of tests (tests/worker_groups.py), heaviest first."""
    return GroupScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


def starts(item: pytest.Item) -> bool:
    """Whether the test's module runs the installed script in new processes (tests/processes.py's runners)."""
    module = getattr(item, "module", None)
    return any(getattr(module, name, None) is getattr(processes, name) for name in PROCESS_RUNNERS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """A test not marked `slow` that runs the CLI (here or in a fixture it sets up) fails: `make test-fast` stays
    fast only if every such test is marked."""
    with _cli_runs() as runs:
        yield
    _refuse_unmarked_cli_run(item, runs)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """The same check while the test body runs."""
    with _cli_runs() as runs:
        yield
    _refuse_unmarked_cli_run(item, runs)


@contextlib.contextmanager
def _cli_runs() -> Iterator[list[str]]:
    """Within the block, the subcommand of each CLI run (fit, validate, test, predict) that got past parsing."""
    runs: list[str] = []
    run = LightningCLI._run_subcommand

    def counted(cli: LightningCLI, subcommand: str) -> None:
        runs.append(subcommand)
        run(cli, subcommand)

    LightningCLI._run_subcommand = counted  # type: ignore[method-assign]
    try:
        yield runs
    finally:
        LightningCLI._run_subcommand = run  # type: ignore[method-assign]


def _refuse_unmarked_cli_run(item: pytest.Item, runs: list[str]) -> None:
    """Fail a test that ran the CLI without the `slow` marker."""
    if runs and "slow" not in item.keywords:
        pytest.fail(
            f"runs `tetraformer {runs[0]}` ({len(runs)} CLI runs) but is not marked slow: mark it "
            "(@pytest.mark.slow) or give it a fixture of FIT_FIXTURES in tests/conftest.py",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _seed() -> None:
    """Seed torch so every test sees the same weights and inputs (TETRAFORMER_TEST_SEED, 0 by default)."""
    torch.manual_seed(TEST_SEED)


@pytest.fixture
def tiny_config() -> Callable[..., TransformerConfig]:
    """Factory: the tiny preset (d_model 32, 2 layers, vocab 100, dropout off) with overrides."""

    def make(**overrides: Any) -> TransformerConfig:
        return TransformerConfig.preset("tiny", **{**TINY, **overrides})

    return make


@pytest.fixture
def tiny_model(tiny_config: Callable[..., TransformerConfig]) -> Callable[..., nn.Module]:
    """Factory: a tiny family ("encoder", "causal", "seq2seq", "image") in eval mode, fp32."""

    def make(family: str, **overrides: Any) -> nn.Module:
        cfg = tiny_config(**{**FAMILY_DEFAULTS.get(family, {}), **overrides})
        return FAMILIES[family](cfg).eval()

    return make


@pytest.fixture
def eager_twin() -> Callable[[nn.Module], nn.Module]:
    """Factory: a copy of a model with the same weights that runs the eager attention backend."""

    def make(model: nn.Module) -> nn.Module:
        twin = type(model)(model.cfg.replace(attention="eager")).eval()
        twin.load_state_dict(model.state_dict())
        return twin

    return make


@pytest.fixture
def token_ids() -> Callable[..., torch.Tensor]:
    """Factory: random (batch, length) ids of the tiny vocabulary, avoiding id 0."""

    def make(batch: int, length: int, vocab: int = TINY["vocab_size"]) -> torch.Tensor:
        return torch.randint(1, vocab, (batch, length))

    return make
