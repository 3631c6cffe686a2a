"""`--model.compile`: blocks compiled in place (names unchanged), generation eager, checkpoints load without it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn
from torch.testing import assert_close

from tests.training.tiny_lm import assert_usable_checkpoint, lm_fit
from tetraformer.cli import main
from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.core.generation import GenerationConfig, generate
from tetraformer.training.base.compile import compile_blocks, eager_decoding


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    """Each test compiles from an empty dynamo cache."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def graphs() -> list[torch.fx.GraphModule]:
    """The graphs dynamo hands to `backend` (a backend that records them and runs them as traced)."""
    return []


def _recording(graphs: list[torch.fx.GraphModule]) -> Callable[..., Callable[..., Tensor]]:
    """A torch.compile backend that records each graph and runs it unoptimised (fast to 'compile')."""

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Tensor]) -> Callable[..., Tensor]:
        graphs.append(gm)
        return gm.forward

    return backend


def _twins(cfg: TransformerConfig) -> tuple[nn.Module, nn.Module]:
    """Two CausalLMs with the same weights, in eval mode."""
    eager, compiled = CausalLM(cfg).eval(), CausalLM(cfg).eval()
    compiled.load_state_dict(eager.state_dict())
    return eager, compiled


def test_compiled_blocks_keep_weight_names_and_outputs(
    tiny_config: Callable[..., TransformerConfig], graphs: list
) -> None:
    """Every Block is compiled in place: the state_dict keys stay the eager ones, outputs are the same, and the
    blocks' forward really runs as a dynamo graph."""
    eager, compiled = _twins(tiny_config(n_layers=3))
    assert compile_blocks(compiled, backend=_recording(graphs)) == 3
    assert list(compiled.state_dict()) == list(eager.state_dict())
    assert not any(k.startswith("_orig_mod") or "._orig_mod." in k for k in compiled.state_dict())
    ids = torch.randint(1, 100, (2, 10))
    assert_close(compiled(ids), eager(ids))
    assert graphs


def test_generation_runs_compiled_blocks_eagerly(tiny_config: Callable[..., TransformerConfig], graphs: list) -> None:
    """Under eager_decoding, cached generation compiles nothing more and equals the eager model's; without it, each
    new cache length would trace again."""
    eager, compiled = _twins(tiny_config())
    compile_blocks(compiled, backend=_recording(graphs))
    ids = torch.randint(1, 100, (2, 5))
    compiled(ids)  # the training-style forward compiles
    before = len(graphs)
    greedy = GenerationConfig(max_new_tokens=6)
    with eager_decoding():
        out = generate(compiled, ids, None, greedy)
    assert len(graphs) == before
    assert torch.equal(out, generate(eager, ids, None, greedy))
    generate(compiled, ids, None, greedy)
    assert len(graphs) > before


@pytest.mark.slow
def test_compiled_fit_writes_a_checkpoint_that_loads_eagerly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fit with --model.compile (inductor on CPU) and activation checkpointing writes a checkpoint whose weight
    names are the eager network's; it loads and generates without compiling, through `tetraformer generate` too.
    The CPU allocator setting applies to the compiled fit as to an eager one."""
    kept = []
    monkeypatch.setattr("tetraformer.training.base.module.keep_freed_memory", lambda: kept.append(True) or True)
    fit = lm_fit(tmp_path, monkeypatch)
    short = ["--trainer.max_steps", "2", "--trainer.limit_val_batches", "0"]  # one compiled graph: training's
    run = fit("--model.compile", "true", "--model.arch.activation_checkpointing", "true", *short)
    assert kept
    ckpt = assert_usable_checkpoint(run, steps=2)
    assert ckpt["hyper_parameters"]["compile"] is True
    capsys.readouterr()
    main(["generate", "--ckpt", str(run / "checkpoints" / "last.ckpt"), "--prompt", "First", "--max-new-tokens", "8"])
    assert capsys.readouterr().out.startswith("First")
