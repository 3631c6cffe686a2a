"""The kernel choices that change numbers: set by rule or by the user, never timed; a checkpoint's are reused."""

from __future__ import annotations

import pytest

from tetraformer.accel import numerics
from tetraformer.accel.numerics import ENV, Numerics, from_env, native_bf16, restored
from tetraformer.errors import ConfigError


@pytest.fixture(autouse=True)
def no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No TETRAFORMER_* kernel setting in the environment unless a test sets one."""
    for name in ENV.values():
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        (["avx2", "fma"], False),  # AVX2 only (Zen 3)
        (["avx2", "avx512f", "avx512_bf16"], True),  # Zen 4
        (["avx2", "avx512f", "amx_bf16", "amx_tile"], True),  # Sapphire Rapids
        (["asimd", "sve", "bf16"], True),  # Arm with BF16
        (["avx2", "avx512f", "avx512_bf16", "ONEDNN_MAX_CPU_ISA=AVX2"], False),  # capped below bf16
        (["avx2", "avx512f", "avx512_bf16", "ONEDNN_MAX_CPU_ISA=avx512_core_amx"], True),
    ],
)
def test_native_bf16_reads_the_flags_and_a_onednn_cap(flags: list[str], native: bool) -> None:
    """Native bf16 dot products: AVX-512 BF16, AMX or Arm's BF16, unless oneDNN is capped below them."""
    assert native_bf16(flags) is native


@pytest.mark.parametrize(("native", "layout"), [(True, "natural"), (False, "transposed")])
def test_rules_without_settings(monkeypatch: pytest.MonkeyPatch, native: bool, layout: str) -> None:
    """Unset: SDPA's own dispatch, nn.Linear's layouts where bf16 is native (else A.T @ B), the logits' loss."""
    monkeypatch.setattr(numerics, "native_bf16", lambda: native)
    assert from_env() == Numerics("auto", layout, "logits")
    assert from_env().attention_kernel() == "sdpa"


def test_the_environment_sets_each_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """TETRAFORMER_ATTENTION, TETRAFORMER_BF16_LAYOUT and TETRAFORMER_LM_LOSS name the choice outright."""
    monkeypatch.setenv("TETRAFORMER_ATTENTION", "eager")
    monkeypatch.setenv("TETRAFORMER_BF16_LAYOUT", "transposed")
    monkeypatch.setenv("TETRAFORMER_LM_LOSS", "fused")
    assert from_env() == Numerics("eager", "transposed", "fused")


@pytest.mark.parametrize("field", list(ENV))
def test_a_value_a_setting_does_not_take_is_one_line(monkeypatch: pytest.MonkeyPatch, field: str) -> None:
    """A wrong value stops with a ConfigError naming the variable and what it takes."""
    monkeypatch.setenv(ENV[field], "fastest")
    with pytest.raises(ConfigError, match=f"{ENV[field]}=fastest: must be one of auto, "):
        from_env()


def test_a_checkpoints_choices_are_reused_over_this_machines_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run saved on an AVX2 CPU (transposed layouts) and resumed on a native-bf16 one keeps its layouts, and the
    kernel and loss path it was given; a checkpoint without any takes this process's."""
    monkeypatch.setattr(numerics, "native_bf16", lambda: True)
    saved = Numerics("eager", "transposed", "fused").state()
    assert saved == {"attention": "eager", "bf16_layout": "transposed", "lm_loss": "fused"}
    assert restored(saved) == Numerics("eager", "transposed", "fused")
    assert restored(None) == from_env() == Numerics()


def test_a_setting_given_on_resume_wins_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The user's word on resume wins over the checkpoint's, with a warning that the numbers now differ; the same
    value, or `auto`, says nothing."""
    saved = Numerics("sdpa", "natural", "logits").state()
    monkeypatch.setenv("TETRAFORMER_ATTENTION", "sdpa")
    monkeypatch.setenv("TETRAFORMER_BF16_LAYOUT", "auto")
    assert restored(saved) == Numerics("sdpa", "natural", "logits") and caplog.text == ""
    monkeypatch.setenv("TETRAFORMER_LM_LOSS", "fused")
    assert restored(saved).lm_loss == "fused"
    assert "TETRAFORMER_LM_LOSS=fused, where the checkpoint's run computed with logits" in caplog.text
