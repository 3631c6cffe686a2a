"""Operand layouts of bf16 CPU matmuls, chosen by timing the candidates on this machine and cached per shape.

oneDNN's bf16 kernels differ by CPU. Without native bf16 units (AVX2) `A.T @ B` (A, B row-major) runs 10-20x
faster than the `x @ W.T` and `g @ W` nn.Linear issues; with AVX-512 BF16 every layout runs alike and the
copies a re-laid operand needs are pure cost. Which of the two a run takes changes its numbers, so it is a rule
(accel/numerics.py: `transposed` without native bf16, else `natural`), never a timing. Within `natural`, each
product of a Linear (forward, input gradient, weight gradient) is timed in those candidate layouts whose results
equal nn.Linear's bit for bit (on probes at the call's rows and at both ends of its bucket) the first time its
shape is seen, the fastest is kept, and the choices go to a JSON file keyed by the machine, so later runs on it
skip the timing. Candidates are timed on values from a private generator: a run's random stream (so its dropout
masks and data order) is the same whether the cache held a choice or not.

A layout names the memory order of A and B in `A @ B`: "r" row-major (contiguous), "c" column-major (a
contiguous transpose). The math is the same in every layout; the kernel oneDNN picks, and so the order it sums
in, may change.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import platform
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

from tetraformer.files import cache_root

log = logging.getLogger(__name__)

Product = Literal["fwd", "dx", "dw"]  # y = x W^T; grad_x = g W; grad_w = g^T x
NATURAL: dict[str, str] = {"fwd": "rc", "dx": "rr", "dw": "cr"}  # the layouts nn.Linear's operands come in
TRANSPOSED = "cr"  # `A.T @ B`: the layout AVX2's bf16 kernels favour
CANDIDATES: dict[str, tuple[str, ...]] = {p: tuple(dict.fromkeys((NATURAL[p], "cr", "rc"))) for p in NATURAL}
PRUNE = 3.0  # a candidate whose first call is this many times the best so far is not timed further
MARGIN = 1.1  # a candidate must beat the default (natural layout) by this factor: copies and noise cost too
CALLS = 3  # timed runs per candidate and pass (after one untimed warm-up call); the fastest counts
ROUNDS = 2  # passes over the candidates, in alternating order
CHUNK_S = 2e-4  # a timed run repeats calls shorter than this, so clock resolution and jitter do not decide

ISA_FLAGS = (  # the instruction sets oneDNN's kernels choose by: x86 (/proc/cpuinfo flags), then Arm (Features)
    *("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"),
    *("asimd", "sve", "sve2", "bf16", "i8mm"),
)
Shape = tuple[int, int, int]  # (M, N, K) of a Linear: M rows of N inputs, K outputs
Timer = Callable[[str, str, Callable[[], object], float], float]  # (key, candidate, its call, best so far) -> s
Calls = dict[str, Callable[[], object]]  # candidate -> a call returning its result (a tensor, or a tuple of them)


def as_layout(t: Tensor, order: str) -> Tensor:
    """t in row-major ("r") or column-major ("c") memory order (a copy only when it is not already)."""
    return t.t().contiguous().t() if order == "c" else t.contiguous()


def matmul(a: Tensor, b: Tensor, layout: str, bias: Tensor | None = None) -> Tensor:
    """a @ b (+ bias) with the operands laid out as the layout says: (P, Q) x (Q, R) -> (P, R)."""
    a, b = as_layout(a, layout[0]), as_layout(b, layout[1])
    return torch.addmm(bias, a, b) if bias is not None else a @ b


def probe(*size: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """Values to time kernels on, drawn from a private generator: nothing is drawn from the global random stream."""
    return torch.randn(*size, dtype=dtype, generator=torch.Generator().manual_seed(0))


def operands(product: str, shape: Shape, dtype: torch.dtype = torch.bfloat16) -> tuple[Tensor, Tensor]:
    """Operands of one product of a Linear of this shape, in the layouts nn.Linear has them."""
    m, n, k = shape
    x, w, g = probe(m, n, dtype=dtype), probe(k, n, dtype=dtype), probe(m, k, dtype=dtype)
    return {"fwd": (x, w.t()), "dx": (g, w), "dw": (g.t(), x)}[product]


def own_saved_tensors() -> torch.autograd.graph.saved_tensors_hooks:
    """Tensors saved for backward kept as they are, whatever hooks the caller set: timing inside an activation-
    checkpointed block must not hand its probes to the checkpoint (whose backward would rerun the block)."""
    return torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)


def time_call(key: str, name: str, call: Callable[[], object], best: float) -> float:
    """Seconds per call: the fastest of CALLS timed runs after an untimed warm-up (oneDNN builds its kernel on
    the first call), each run repeating a tiny call until it lasts CHUNK_S; one run only when far behind `best`."""
    call()
    reps, times = 1, []
    for _ in range(CALLS):
        start = time.perf_counter()
        for _ in range(reps):
            call()
        times.append((time.perf_counter() - start) / reps)
        if times[0] > PRUNE * best:
            break
        reps = max(reps, min(1000, int(CHUNK_S / max(times[0], 1e-9))))
    return min(times)


def layout_calls(product: str, shape: Shape) -> dict[str, Callable[[], Tensor]]:
    """One call per candidate layout of a product, on operands of the shape."""
    a, b = operands(product, shape)
    return {layout: functools.partial(matmul, a, b, layout) for layout in CANDIDATES[product]}


def layout_results(product: str, shape: Shape) -> dict[str, tuple[Tensor, ...]]:
    """Each candidate layout's products at the shape's rows and at the first and last rows of its bucket: a kernel
    may sum in another order at other rows, and every call in the bucket takes the bucket's choice."""
    m, n, k = shape
    rows = sorted({m, bucket(m) // 2 + 1, bucket(m)})
    calls = [layout_calls(product, (r, n, k)) for r in rows]
    return {layout: tuple(c[layout]() for c in calls) for layout in CANDIDATES[product]}


def same(a: object, b: object) -> bool:
    """Whether two results are equal bit for bit: tensors by torch.equal (dtype and shape too), tuples item by item."""
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a is None and b is None


def bucket(m: int) -> int:
    """Rows rounded up to a power of two: varying batch lengths share one timing."""
    return 1 << max(m - 1, 0).bit_length()


def machine_key() -> str:
    """What the timings depend on: CPU model and instruction sets, torch version, threads and any oneDNN ISA cap.

    The model name alone does not tell machines apart: a cloud VM may show only "AMD EPYC" for an AVX2-only Zen 3
    and an AVX-512 BF16 Zen 4 alike, and a cache shared between them (a cluster's home directory) would hand one
    the other's choices.
    """
    return f"{cpu_model()} [{' '.join(cpu_flags())}] | torch {torch.__version__} | {torch.get_num_threads()} threads"


def device_machine_key() -> str:
    """machine_key's CPU line, and the GPU's name where there is one."""
    gpu = f" | {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return machine_key() + gpu


def positive_number(value: object) -> bool:
    """Whether a cached value is a usable measured rate: a finite number above 0."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")


def cpu_flags() -> list[str]:
    """The CPU's matmul-relevant instruction-set flags (from /proc/cpuinfo), and any oneDNN ISA cap in force."""
    try:
        flags = isa_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        flags = []
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    return flags + ([f"ONEDNN_MAX_CPU_ISA={cap}"] if cap else [])


BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")  # Intel AMX, AVX-512 BF16, Arm's BF16 extension
ONEDNN_CAPS_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI")


def bf16_cpu_flag(flags: list[str] | None = None) -> str | None:
    """The flag by which this CPU (or one of `flags`) runs bf16 dot products natively; None without one, or when
    ONEDNN_MAX_CPU_ISA caps oneDNN below its bf16 kernels. The one rule for precision `auto` and bf16 layouts."""
    flags = cpu_flags() if flags is None else flags
    cap = next((f.partition("=")[2].upper() for f in flags if f.startswith("ONEDNN_MAX_CPU_ISA=")), None)
    if cap in ONEDNN_CAPS_WITHOUT_BF16:
        return None
    return next((flag for flag in BF16_FLAGS if flag in flags), None)


def isa_flags(cpuinfo: str) -> list[str]:
    """ISA_FLAGS named on the first x86 "flags" or Arm "Features" line of /proc/cpuinfo's text, in ISA_FLAGS' order."""
    line = next((x for x in cpuinfo.splitlines() if x.startswith(("flags", "Features"))), ":")
    present = set(line.split(":", 1)[1].split())
    return [flag for flag in ISA_FLAGS if flag in present]


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cache_path() -> Path:
    """The layout cache file: $TETRAFORMER_CACHE_DIR, else $XDG_CACHE_HOME/tetraformer, else ~/.cache/tetraformer."""
    return cache_root() / CHOOSER.name


class LayoutChooser:
    """Picks the fastest of a few ways to compute something that give the default's result bit for bit, by timing
    them once per key on this machine; remembers the picks in a file. A candidate whose result differs from the
    default's on the probes is never timed (a choice that changes numbers is a rule's, accel/numerics.py): on a
    loaded machine timing is noise, and weights must not depend on it. LayoutLinear's bf16 products are its main
    user; the attention kernels and the MFU peak (a measured rate, `measured`) keep theirs the same way, each in a
    file of its own."""

    def __init__(
        self,
        timer: Timer = time_call,
        path: Path | None = None,
        machine: Callable[[], str] = machine_key,
        name: str = "matmul_layouts-v2.json",
        margin: float = MARGIN,
        exact: Callable[[object, object], bool] = same,
    ) -> None:
        self.timer, self.path, self.machine, self.name, self.margin = timer, path, machine, name, margin
        self.exact = exact  # whether a candidate's result is the default's (bit for bit)
        self.choices: dict[str, str | float] | None = None  # "fwd 2048x256x1024" -> layout, loaded on first use
        self.locked = False  # whether this process holds the cache file's lock

    def layout(self, product: str, shape: Shape, mode: str = "natural") -> str:
        """The layout to run this product of a Linear of this shape in: `transposed` mode's, or in `natural` mode
        the fastest of those equal to nn.Linear's bit for bit (timed now if never seen)."""
        if mode == "transposed":
            return TRANSPOSED
        key = f"{product} {bucket(shape[0])}x{shape[1]}x{shape[2]}"
        return self.pick(
            key, NATURAL[product], lambda: layout_calls(product, shape), lambda: layout_results(product, shape)
        )

    def pick(
        self,
        key: str,
        default: str,
        calls: Callable[[], Calls],
        results: Callable[[], dict[str, object]] | None = None,
    ) -> str:
        """The cached choice for key, or the fastest of calls() whose result equals the default's bit for bit
        (`results()` gives each candidate's results to compare, else each call's own); the default unless another
        beats it by the margin."""
        return str(self._cached(key, lambda: self._fastest(key, default, calls(), results), lambda value: True))

    def measured(self, key: str, measure: Callable[[], float]) -> float:
        """The cached positive number for key (a rate this machine reaches), or measure()'s, then kept."""
        return float(self._cached(key, measure, positive_number))

    def _cached(self, key: str, make: Callable[[], str | float], valid: Callable[[object], bool]) -> str | float:
        """This machine's value for key: remembered, else from the file, else made now and written to it."""
        choices = self._choices()
        if key not in choices or not valid(choices[key]):
            with self._lock():  # one process on this machine times a key; the others then read its value
                cached = self._read().get(self.machine(), {}).get(key)
                choices[key] = cached if cached and valid(cached) else make()
                self._save(key, choices[key])
        return choices[key]

    def replace(self, key: str, value: float) -> None:
        """Keep `value` for key in place of what was kept (a measured rate found wrong)."""
        with self._lock():
            self._choices()[key] = value
            self._save(key, value)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Hold the cache file's lock (an exclusive flock on a file beside it); without one when it cannot be had."""
        path = self.file()
        if self.locked:  # timing one key asked for another (this process holds the lock already)
            yield
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(path.with_name(f".{path.name}.lock"), "a")  # noqa: SIM115 - closed below
        except OSError:
            yield
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            self.locked = True
            yield
        finally:
            self.locked = False
            handle.close()  # closing releases the lock

    def _fastest(
        self, key: str, default: str, calls: Calls, results: Callable[[], dict[str, object]] | None = None
    ) -> str:
        """Time every candidate that computes the default's result bit for bit (outside autocast and autograd) in
        ROUNDS passes, each pass in the reverse order of the one before, so that load from elsewhere on the machine
        (another job starting, a neighbour's burst) falls on every candidate, not on whichever was timed during
        it; each candidate counts its best pass. The fastest wins, unless the default is within the margin of it.
        Where no other candidate is exact, nothing is timed."""
        times: dict[str, float] = {}
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            found = results() if results else {n: c() for n, c in calls.items()}
            names = exact_candidates(default, found, self.exact)
            if names == [default]:
                log.debug("%s: only %s gives its own result; not timed", key, default)
                return default
            for turn in range(ROUNDS):
                for name in names if turn % 2 == 0 else names[::-1]:
                    best = min(times.values(), default=float("inf"))
                    times[name] = min(times.get(name, float("inf")), self.timer(key, name, calls[name], best))
        choice = min(times, key=times.__getitem__)
        if default in times and times[default] <= self.margin * times[choice]:
            choice = default  # close enough: the default needs no copies (Linear: plain F.linear)
        log.debug("%s: %s -> %s", key, {k: f"{v * 1e3:.3f} ms" for k, v in times.items()}, choice)
        return choice

    def file(self) -> Path:
        """Where the choices are kept (`name`; its -v2 files keep only choices bit-identical to the default)."""
        return self.path or cache_root() / self.name

    def _choices(self) -> dict[str, str | float]:
        """This machine's choices so far (read from the cache file once)."""
        if self.choices is None:
            self.choices = dict(self._read().get(self.machine(), {}))
        return self.choices

    def _read(self) -> dict[str, dict[str, str | float]]:
        """The cache file's contents; empty when it is missing or unreadable (it is only a cache)."""
        try:
            data = json.loads(self.file().read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            log.warning("ignoring the kernel choice cache %s: %s", self.file(), err)
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, key: str, layout: str | float) -> None:
        """Add one choice to the file, merged with what other processes wrote, replaced atomically."""
        path = self.file()
        data = self._read()
        data.setdefault(self.machine(), {})[key] = layout
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, path)
        except OSError as err:
            log.warning("could not write the kernel choice cache %s: %s (the choice holds for this run)", path, err)


def exact_candidates(
    default: str, results: dict[str, object], exact: Callable[[object, object], bool] = same
) -> list[str]:
    """The candidates whose results are the default's (`exact`), the default first; only it where it gave none."""
    if default not in results:
        return [default]
    return [default, *(n for n, r in results.items() if n != default and exact(r, results[default]))]


CHOOSER = LayoutChooser(name="matmul_layouts-v2.json")
