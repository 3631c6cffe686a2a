"""Chosen attention: models compute what the stock core computes; the fastest kernel is chosen, kept and reused."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn
from torch.testing import assert_close

from tests.accel.fakes import pretend_exact
from tetraformer.accel import attention_kernels as kernels
from tetraformer.accel import chosen_attention as CHOSEN
from tetraformer.accel.chooser import ROUNDS, LayoutChooser
from tetraformer.accel.chosen_attention import ChosenAttention, choose, measured_attention, use_chosen_attention
from tetraformer.core import Attention, CausalLM, TransformerConfig
from tetraformer.core.cache import LayerCache
from tetraformer.errors import ConfigError

MACHINE = "test machine"
FORCEABLE = ("sdpa", "flash", "math", "eager")  # the kernels that run on a CPU (flash only where SDPA takes it)
Timings = Callable[..., list[tuple[str, str]]]


@pytest.fixture(autouse=True)
def measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test measures unless it forces a kernel itself."""
    monkeypatch.delenv("TETRAFORMER_ATTENTION", raising=False)


def chooser(timer: Callable[..., float], path: Path) -> LayoutChooser:
    """The attention chooser's settings with this timer and file."""
    return LayoutChooser(
        timer, path, machine=lambda: MACHINE, name=path.name, margin=CHOSEN.MARGIN, exact=pretend_exact
    )


def never(key: str, name: str, call: object, best: float) -> float:
    """A timer for where nothing may be timed."""
    raise AssertionError(f"{key}: {name} was timed")


@pytest.fixture
def timings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Timings:
    """timings(name=seconds, ...): the attention chooser times candidates at these (1 s unless named), running
    nothing, in tmp_path/attention_kernels.json; returns the (key, candidate) pairs it is asked to time."""

    def install(**seconds: float) -> list[tuple[str, str]]:
        timed: list[tuple[str, str]] = []

        def timer(key: str, name: str, call: object, best: float) -> float:
            timed.append((key, name))
            return seconds.get(name, 1.0)

        monkeypatch.setattr(CHOSEN, "CHOOSER", chooser(timer, tmp_path / "attention_kernels.json"))
        return timed

    return install


def qk(t: int = 8, s: int = 8, training: bool = False) -> tuple[Tensor, Tensor]:
    """(2, 2, T, 16) queries and (2, 2, S, 16) keys, leaves that need grad in training."""
    return torch.randn(2, 2, t, 16, requires_grad=training), torch.randn(2, 2, s, 16, requires_grad=training)


def chosen(
    q: Tensor, k: Tensor, mask: Tensor | None = None, causal: bool = False, layers: int = 1, setting: str = "auto"
) -> str:
    """The kernel chosen for a call of these shapes, on a layer whose attention setting is `setting`."""
    return choose(q, k, mask, causal, 0.25, 0.0, layers, setting)


@pytest.mark.parametrize("fastest", kernels.CANDIDATES["cpu"])
def test_the_fastest_candidate_is_chosen(timings: Timings, fastest: str) -> None:
    """Whichever CPU candidate the timer finds fastest by more than the margin is the one chosen."""
    timed = timings(**{fastest: 0.5})
    assert chosen(*qk()) == fastest
    assert sorted(name for _, name in timed) == sorted(kernels.CANDIDATES["cpu"] * ROUNDS)  # each once a pass


@pytest.mark.parametrize(("math", "expected"), [(0.81, "sdpa"), (0.79, "math")], ids=["1.23x", "1.27x"])
def test_sdpa_is_kept_unless_another_beats_it_by_the_margin(timings: Timings, math: float, expected: str) -> None:
    """A kernel less than 1.25x faster than SDPA's own pick does not replace it; one more than that does."""
    timings(sdpa=1.0, math=math, eager=0.9)
    assert chosen(*qk()) == expected


def test_a_choice_is_written_and_read_back_without_timing(
    timings: Timings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The choice goes to the file under the machine and the call's key; a new chooser reads it and times nothing,
    for every call of the same key (lengths in one bucket)."""
    timings(eager=0.1)
    q, k = qk(t=7, s=7)
    assert chosen(q, k) == "eager"
    path = tmp_path / "attention_kernels.json"
    assert json.loads(path.read_text()) == {MACHINE: {kernels.choice_key(q, k, None, False, 0.0, False): "eager"}}
    monkeypatch.setattr(CHOSEN, "CHOOSER", chooser(never, path))
    assert chosen(*qk(t=8, s=8)) == "eager"


def test_a_second_chooser_reads_a_choice_made_after_it_loaded(tmp_path: Path) -> None:
    """Two choosers on one file (as two processes): the second, already holding the file's older contents, reads
    under the lock the key the first chose meanwhile, and times nothing."""
    path, candidates = tmp_path / "attention_kernels.json", {"a": object, "b": object}
    first = chooser(lambda key, name, call, best: {"a": 1.0, "b": 0.1}[name], path)
    second = chooser(never, path)
    assert first.pick("old", "a", lambda: candidates) == "b"
    assert second.pick("old", "a", lambda: candidates) == "b"  # second now holds the file as it was
    assert first.pick("new", "a", lambda: candidates) == "b"
    assert second.pick("new", "a", lambda: pytest.fail("the calls were built for a chosen key")) == "b"


def test_each_kind_of_call_is_timed_once(timings: Timings) -> None:
    """Training and inference, mask kinds, dtypes and length buckets are timed apart; each once."""
    timed = timings()
    q, k = qk()
    calls = [
        (q, k, None, False),
        (q, k, None, True),
        (q, k, torch.ones(2, 1, 8, 8, dtype=torch.bool), False),
        (q, k, torch.zeros(1, 2, 8, 8), False),
        (q.bfloat16(), k.bfloat16(), None, False),
        (*qk(t=16, s=16), None, False),
        (*qk(t=4, s=16), None, False),
        (*qk(training=True), None, False),
    ]
    for call in calls + calls:
        chosen(*call)
    assert len({key for key, _ in timed}) == len(calls)
    assert len(timed) == len(calls) * len(kernels.CANDIDATES["cpu"]) * ROUNDS


def layer(**overrides: object) -> ChosenAttention:
    """A self-attention layer (d_model 32, 2 heads) made a ChosenAttention."""
    cfg = TransformerConfig(d_model=32, n_heads=2, n_layers=1, d_ff=64, vocab_size=50, max_len=32, **overrides)
    attention = Attention(cfg)
    use_chosen_attention(attention)
    return attention


def test_training_and_inference_of_one_layer_are_timed_apart(timings: Timings) -> None:
    """A forward that builds a graph times the training pass; under no_grad, even in train mode, inference."""
    timed, attention, x = timings(), layer(), torch.randn(2, 8, 32)
    attention(x)
    with torch.no_grad():
        attention(x)
    assert [key.split()[1] for key, _ in timed[:: len(kernels.CANDIDATES["cpu"]) * ROUNDS]] == ["train", "infer"]


def test_weights_eager_backend_and_decoding_steps_time_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Calls that want the weights, layers on the eager backend and single-query decoding steps keep the core's
    path: nothing is timed, and the weighted and decoding calls return what the stock layer does."""
    monkeypatch.setattr(CHOSEN, "CHOOSER", chooser(never, tmp_path / "attention_kernels.json"))
    x = torch.randn(2, 6, 32)
    attention = layer()
    stock = copy.deepcopy(attention)
    stock.__class__ = Attention
    y, weights = attention(x, need_weights=True)
    assert weights is not None and torch.equal(y, stock(x, need_weights=True)[0])
    layer(attention="eager")(x)
    caches = [LayerCache(), LayerCache()]
    with torch.no_grad():
        for cache in caches:
            stock(x, is_causal=True, cache=cache)
        for step in torch.randn(3, 2, 1, 32):
            assert torch.equal(attention(step, cache=caches[0])[0], stock(step, cache=caches[1])[0])


def test_decoding_steps_add_no_timing_to_the_prompt(timings: Timings, token_ids: Callable[..., Tensor]) -> None:
    """A causal LM's prompt is timed; its cached one-token steps are not."""
    timed = timings()
    model = CausalLM(TransformerConfig(d_model=32, n_heads=2, n_layers=2, d_ff=64, vocab_size=100, max_len=32))
    use_chosen_attention(model.eval())
    ids, cache = token_ids(2, 9), model.new_cache()
    with torch.no_grad():
        model(ids[:, :5], cache=cache)
        prompt = len(timed)
        for i in range(5, 9):
            model(ids[:, i : i + 1], cache=cache)
    assert prompt > 0 and len(timed) == prompt


@pytest.mark.parametrize("training", [False, True], ids=["infer", "train"])
def test_quadratic_kernels_are_neither_timed_nor_used_beyond_the_budget(
    timings: Timings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, training: bool
) -> None:
    """With no memory budget only SDPA is a candidate (so nothing is timed), and math or eager, even cached or
    forced, give way to SDPA."""
    monkeypatch.setattr(kernels, "budget", lambda device: 0)
    timed = timings(math=0.1, eager=0.1)
    q, k = qk(training=training)
    assert chosen(q, k) == "sdpa"
    assert timed == []
    bias = torch.zeros(1, 2, 8, 8)
    key = kernels.choice_key(q, k, bias, False, 0.0, training)
    (tmp_path / "attention_kernels.json").write_text(json.dumps({MACHINE: {key: "math"}}))
    assert chosen(q, k, bias) == "sdpa"
    assert chosen(q, k, setting="eager") == "sdpa"


def test_quadratic_kernels_are_eligible_within_the_budget(timings: Timings, monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for every layer's scores the quadratic kernels are timed and chosen; with one layer more, not."""
    q, k = qk(training=True)
    monkeypatch.setattr(kernels, "budget", lambda device: kernels.score_bytes(q, k, True, 4))
    timed = timings(eager=0.1)
    assert chosen(q, k, layers=4) == "eager"
    assert {name for _, name in timed} == set(kernels.CANDIDATES["cpu"])
    assert chosen(q, k, layers=5) == "sdpa"  # the cached choice no longer fits


def test_a_cached_kernel_that_does_not_fit_never_runs(
    timings: Timings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A layer whose cached choice is math runs SDPA when the scores do not fit: the math kernel is never called."""
    monkeypatch.setattr(kernels, "budget", lambda device: 0)
    monkeypatch.setitem(kernels.KERNELS, "math", lambda *args: pytest.fail("math ran beyond the budget"))
    attention, x = layer(), torch.randn(2, 8, 32)
    q = torch.zeros(2, 2, 8, 16)
    key = kernels.choice_key(q, q, None, False, 0.0, False)
    (tmp_path / "attention_kernels.json").write_text(json.dumps({MACHINE: {key: "math"}}))
    timed = timings()
    with torch.no_grad():
        attention(x)
    assert timed == []


def test_an_unknown_forced_kernel_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """TETRAFORMER_ATTENTION names auto or a kernel; the error (one line) lists them."""
    monkeypatch.setenv("TETRAFORMER_ATTENTION", "bogus")
    with pytest.raises(ConfigError, match="TETRAFORMER_ATTENTION") as error:
        layer()
    assert all(name in str(error.value) for name in ("auto", *kernels.KERNELS))


def test_a_faster_kernel_that_differs_from_sdpa_is_not_chosen(
    timings: Timings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the real comparison, a kernel whose outputs or gradients differ from SDPA's in any bit is never timed
    nor chosen, however fast the timer says it is: on a CPU, math and eager sum in other orders than SDPA's."""
    timed = timings(eager=0.01, math=0.01)
    monkeypatch.setattr(CHOSEN.CHOOSER, "exact", LayoutChooser().exact)
    assert chosen(*qk(t=16, s=16, training=True)) == "sdpa"
    assert timed == []


def test_the_context_restores_stock_layers(tiny_model: Callable[..., nn.Module]) -> None:
    """Within chosen_attention every core attention layer is a ChosenAttention with the same state-dict keys; after
    it (also after an error) every one is stock again."""
    model = tiny_model("seq2seq")
    keys = list(model.state_dict())
    stock = [name for name, m in model.named_modules() if type(m) is Attention]
    with pytest.raises(KeyError), measured_attention(model):
        assert [name for name, m in model.named_modules() if type(m) is ChosenAttention] == stock
        assert list(model.state_dict()) == keys
        raise KeyError("inside")
    assert [name for name, m in model.named_modules() if type(m) is Attention] == stock
    assert not any(type(m) is ChosenAttention for m in model.modules())


CASES = {  # family, config overrides, padded: every mask kind and grouped-query attention between them
    "encoder-relative-padded": ("encoder", {"position": "relative"}, True),
    "causal-gqa-rotary-padded": ("causal", {"n_heads": 4, "n_kv_heads": 2, "position": "rotary"}, True),
    "causal-mqa": ("causal", {"n_heads": 4, "n_kv_heads": 1}, False),
    "seq2seq-relative-padded": ("seq2seq", {"position": "relative"}, True),
    "image": ("image", {}, False),
}


def model_inputs(family: str, padded: bool, ids: Callable[..., Tensor]) -> tuple[tuple[Tensor, ...], dict]:
    """Positional and keyword inputs of a tiny family: two rows of 7 tokens (images: 2 of 3x32x32), the second
    right-padded to 4 when padded (a seq2seq model pads its source)."""
    if family == "image":
        return (torch.randn(2, 3, 32, 32),), {}
    mask = {"attention_mask": torch.tensor([[1] * 7, [1] * 4 + [0] * 3])} if padded else {}
    return ((ids(2, 7), ids(2, 5)) if family == "seq2seq" else (ids(2, 7),)), mask


def logits_and_grads(model: nn.Module, args: tuple[Tensor, ...], kw: dict, autocast: bool) -> list[Tensor]:
    """The model's output (logits or final hidden states) and every parameter's gradient of a fixed random loss."""
    dtype = next(model.parameters()).dtype
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = model(*(a.to(dtype) if a.is_floating_point() else a for a in args), **kw)
    out = getattr(out, "last_hidden_state", out)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(out.dtype)
    grads = torch.autograd.grad((out * weights).sum(), list(model.parameters()))
    return [out, *grads]


def agree(ours: list[Tensor], stock: list[Tensor], precision: str) -> None:
    """fp32: float rounding; bf16: a few bf16 roundings of each tensor's largest value (two layers of bf16
    activations round differently in each kernel's order; a wrong mask or head would be off by its whole size)."""
    for got, want in zip(ours, stock, strict=True):
        if precision == "fp32":
            assert_close(got, want, rtol=1e-4, atol=1e-5)
        else:
            assert_close(got.float(), want.float(), rtol=2**-5, atol=2**-4 * want.float().abs().max().item())


@pytest.mark.filterwarnings("ignore:Flash attention kernel not used:UserWarning")
@pytest.mark.parametrize("precision", ["fp32", "bf16", "bf16-autocast"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("kernel", FORCEABLE)
def test_forced_kernels_give_the_stock_models_logits_and_gradients(
    tiny_model: Callable[..., nn.Module],
    token_ids: Callable[..., Tensor],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    kernel: str,
    case: str,
    precision: str,
) -> None:
    """A model on each forced kernel computes the stock model's outputs and parameter gradients (training, with
    masks, position biases and grouped-query heads; in fp32, bf16 and under bf16 autocast) and keeps its
    state-dict keys; nothing is timed."""
    family, overrides, padded = CASES[case]
    stock = tiny_model(family, **overrides).to(torch.bfloat16 if precision == "bf16" else torch.float32).train()
    ours = copy.deepcopy(stock)
    assert len(use_chosen_attention(ours, kernel)) > 0 and list(ours.state_dict()) == list(stock.state_dict())
    monkeypatch.setattr(CHOSEN, "CHOOSER", chooser(never, tmp_path / "attention_kernels.json"))
    args, kw = model_inputs(family, padded, token_ids)
    autocast = precision == "bf16-autocast"
    expected = logits_and_grads(stock, args, kw, autocast)
    try:
        got = logits_and_grads(ours, args, kw, autocast)
    except ConfigError as error:  # a forced kernel that cannot take the call: one line naming it
        assert kernel == "flash", f"{kernel} refused a CPU model's inputs"
        assert str(error).startswith("TETRAFORMER_ATTENTION=flash cannot run this attention call (")
        pytest.skip("SDPA's flash kernel does not take these inputs on this CPU (a learned bias needs its gradient)")
    agree(got, expected, precision)


def test_timing_inside_an_activation_checkpointed_block_keeps_its_probes_to_itself(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_model: Callable[..., nn.Module], token_ids: Callable
) -> None:
    """Kernels timed for real on a cold cache from inside checkpointed blocks (the block's saved-tensor hooks are
    active there) give the stock model's gradients, and timing never reruns a block (which would re-enter the
    chooser while it holds its file lock)."""
    real = LayoutChooser(path=tmp_path / "attention_kernels.json", machine=lambda: MACHINE, margin=CHOSEN.MARGIN)
    monkeypatch.setattr(CHOSEN, "CHOOSER", real)
    model = tiny_model("causal", activation_checkpointing=True).train()
    ids = token_ids(2, 8)
    stock = logits_and_grads(model, (ids,), {}, autocast=False)
    with measured_attention(model):
        ours = logits_and_grads(model, (ids,), {}, autocast=False)
    assert json.loads((tmp_path / "attention_kernels.json").read_text())[MACHINE]  # timed, not read
    agree(ours, stock, "fp32")


def test_a_choice_asked_for_while_another_is_timed_does_not_wait_on_its_own_lock(tmp_path: Path) -> None:
    """The file lock is held once per process: a pick made inside another's candidates returns."""
    picker = chooser(lambda key, name, call, best: 1.0, tmp_path / "attention_kernels.json")
    inner = lambda: {"sdpa": lambda: None, "eager": lambda: None}  # noqa: E731
    outer = lambda: {"sdpa": lambda: None, "inner": lambda: picker.pick("inner key", "sdpa", inner)}  # noqa: E731
    assert picker.pick("outer key", "sdpa", outer) == "sdpa"
    assert set(json.loads((tmp_path / "attention_kernels.json").read_text())[MACHINE]) == {"outer key", "inner key"}
