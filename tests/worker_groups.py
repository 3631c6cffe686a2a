"""Which tests share a pytest-xdist worker, and in which order the groups are handed out.

A group runs on one worker, in collection order, so its module and session fixtures (a task's reference run, a
file's fitted run) are built once: a test file's tests form a group, except the promise tests of a task
(parametrized by `task`), which share the task's reference run across files (tests/promises/conftest.py).

pytest-xdist's own `--dist loadgroup` groups by the `xdist_group` mark through `item._nodeid`, which pytest 9.2's
nodes no longer read: every test became a group of its own (a reference fitted on each worker, a module fixture
rebuilt for each test handed elsewhere). `GroupScheduling` groups by the test's node id instead, and
`heaviest_first` puts the groups that start processes first, so the long ones do not end the run on one worker.
"""

from __future__ import annotations

import re
from importlib.metadata import entry_points

import pytest
from xdist.scheduler import LoadScopeScheduling

PROMISES = "tests/promises/"
TASKS = frozenset(point.name for point in entry_points(group="tetraformer.tasks"))  # the installed tasks
PARAMS = re.compile(r"\[(.*)\]$")


def group_of(nodeid: str) -> str:
    """The group of a test: `promises::TASK` for a promise test of a task, else its file."""
    path = nodeid.split("::", 1)[0]
    params = PARAMS.search(nodeid)
    if path.startswith(PROMISES) and params:
        task = next((part for part in params.group(1).split("-") if part in TASKS), None)
        if task:
            return f"promises::{task}"
    return path


def weight(items: list[pytest.Item]) -> tuple[int, int]:
    """How early a group goes out: promise groups, then groups that start processes, then the rest (more slow tests
    first within each)."""
    slow = sum(1 for item in items if item.get_closest_marker("slow"))
    several = any(item.get_closest_marker("distributed") for item in items)
    promises = any(item.nodeid.startswith(PROMISES) for item in items)
    return (3 if promises else 2 if several else 1 if slow else 0), slow


def heaviest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items, group by group (each group's tests together, in their order), heaviest groups first."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(group_of(item.nodeid), []).append(item)
    ordered = sorted(groups.values(), key=weight, reverse=True)  # stable: equal groups keep collection order
    return [item for group in ordered for item in group]


class GroupScheduling(LoadScopeScheduling):
    """pytest-xdist scheduling that hands out whole groups (`group_of`), in collection order."""

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False  # collection order is already heaviest first

    def _split_scope(self, nodeid: str) -> str:
        """The scope of a node id: its group."""
        return group_of(nodeid)
