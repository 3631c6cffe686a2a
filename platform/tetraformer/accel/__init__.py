"""Hardware-specific speed paths for the core's models, chosen by timing them on the machine that runs.

The core builds stock `nn.Linear` and calls `F.linear`/SDPA only; this package is applied to a built model from
outside. `use_bf16_layouts` makes a network's Linear layers run their bf16 CPU products in the operand layouts
timed fastest here (the training module does so for CPU runs in bf16); `decoding` is a context around the core's
`generate` that multiplies decoding steps' few rows by a transposed LM-head copy or oneDNN-packed weights where
those were timed faster. Every choice is timed once per shape on values that draw nothing from the global random
stream, and cached per machine (`chooser.cache_path`); `TETRAFORMER_BF16_LAYOUT=natural|transposed|auto` overrides
the bf16 layouts. `use_chosen_attention` makes a network's attention layers run the kernel (SDPA's backends or
batched matmuls) timed fastest here for each kind of call, within a memory budget (`chosen_attention.py`;
`TETRAFORMER_ATTENTION` forces one). `allocator.keep_freed_memory` keeps a CPU
fit's freed buffers in the process (glibc mallopt; `TETRAFORMER_MALLOC=default` turns it off). The core never
imports this package.
"""

from tetraformer.accel.bf16_linear import LayoutLinear, bf16_layouts, use_bf16_layouts
from tetraformer.accel.chosen_attention import measured_attention, use_chosen_attention
from tetraformer.accel.decoding import decoding

__all__ = [
    "LayoutLinear",
    "bf16_layouts",
    "measured_attention",
    "decoding",
    "use_bf16_layouts",
    "use_chosen_attention",
]
