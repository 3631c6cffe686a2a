"""scripts/bench_training.py: its config is a valid tiny fit, and its table compares each variant with the first."""

from __future__ import annotations

from pathlib import Path

import bench_training
import yaml


def test_config_describes_the_size_with_validation_off(tmp_path: Path) -> None:
    """The written config has the size's shape and batch, the CPU clock, no validation, and a corpus to read."""
    config = yaml.safe_load(bench_training.write_config(tmp_path, "d256", steps=7, log_every=2).read_text())
    arch = config["model"]["init_args"]["arch"]
    assert (arch["d_model"], arch["n_layers"], arch["max_len"]) == (256, 4, 256)
    assert config["data"]["init_args"]["batch_size"] == 16
    trainer = config["trainer"]
    assert (trainer["max_steps"], trainer["log_every_n_steps"], trainer["limit_val_batches"]) == (7, 2, 0)
    assert trainer["callbacks"] == [{"class_path": "bench_training.CpuClock"}]
    assert Path(config["data"]["init_args"]["train_path"]).stat().st_size > 10_000


def test_table_takes_medians_and_compares_with_the_first_variant() -> None:
    """Medians over rounds; speed and CPU cost as ratios to the first variant, memory as a difference."""
    results = {
        "plain": [(100.0, 1.0, 600.0), (120.0, 1.2, 610.0), (110.0, 1.1, 605.0)],
        "checkpointing": [(80.0, 1.5, 500.0), (90.0, 1.4, 505.0), (70.0, 1.6, 495.0)],
    }
    lines = bench_training.table(results, markdown=True).splitlines()
    assert lines[0].startswith("| variant | tokens/s")
    assert lines[2] == "| plain | 110 | 1.00x | 1.100 | 1.00x | 605 | +0 MiB |"
    assert lines[3] == "| checkpointing | 80 | 0.73x | 1.500 | 1.36x | 500 | -105 MiB |"
