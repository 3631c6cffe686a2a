"""The `tetraformer` process loads its libraries with the collector paused and freezes them; a process that already
holds Lightning (a test process, a second in-process command) keeps its collector as it is."""

from __future__ import annotations

import gc

import pytest

from tetraformer.cli import startup


def collected(obj: object) -> bool:
    """Whether the collector still walks `obj` (frozen objects sit in no generation)."""
    return any(o is obj for o in gc.get_objects())


def test_a_fresh_process_imports_with_the_collector_off_then_freezes_what_it_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside the block no collection runs; after it, the objects made there are frozen and the collector is on."""
    monkeypatch.setattr(startup, "HEAVY", "a_library_this_process_never_loaded")
    with startup.long_lived_imports():
        assert not gc.isenabled()
        made = [[]]  # a long-lived object the collector tracks
    assert gc.isenabled()
    assert not collected(made[0])


def test_a_process_that_holds_lightning_keeps_its_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lightning already loaded: the block neither pauses the collector nor freezes anything."""
    monkeypatch.setattr(startup, "HEAVY", "pytest")  # loaded in this process
    with startup.long_lived_imports():
        assert gc.isenabled()
        made = [[]]
    assert gc.isenabled() and collected(made[0])


def test_a_failed_import_turns_the_collector_back_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """An import error inside the block leaves the collector on."""
    monkeypatch.setattr(startup, "HEAVY", "a_library_this_process_never_loaded")
    with pytest.raises(ModuleNotFoundError), startup.long_lived_imports():
        import a_module_that_does_not_exist  # noqa: F401
    assert gc.isenabled()
