"""Evaluation command lines: configs first, then the checkpoint's options, then the user's flags."""

from __future__ import annotations

from tetraformer.cli.eval_runs import split_configs


def test_split_configs_keeps_order_of_configs_and_flags() -> None:
    """Every form of a config argument is taken out in order; flags keep theirs."""
    args = ["-c", "a.yaml", "--model.top_k", "5", "--config=b.yaml", "--config", "c.yaml", "--data.x", "1"]
    configs, flags = split_configs(args)
    assert configs == ["-c", "a.yaml", "--config=b.yaml", "--config", "c.yaml"]
    assert flags == ["--model.top_k", "5", "--data.x", "1"]
