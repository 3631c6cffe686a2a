"""Arrows one way: every import under platform/tetraformer/ (top level or inside a function) follows DESIGN.md, and
scripts/ import no other script but their shared modules (scripts/*_common.py), with no circle."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SOURCE_ROOT = Path(__file__).resolve().parents[1] / "platform"
SCRIPTS = SOURCE_ROOT.parent / "scripts"
STDLIB = frozenset(sys.stdlib_module_names)


# area -> (modules it may import besides the stdlib, or None for "anything but `forbidden`"; forbidden prefixes)
RULES: dict[str, tuple[tuple[str, ...] | None, tuple[str, ...]]] = {
    "tetraformer.core": (("torch", "tetraformer.core", "tetraformer.errors"), ()),
    "tetraformer.accel": (
        ("torch", "tetraformer.accel", "tetraformer.core", "tetraformer.errors", "tetraformer.files"),  # + its cache
        (),
    ),
    "tetraformer.payload": (
        ("torch", "tokenizers", "transformers", "tetraformer.core", "tetraformer.errors", "tetraformer.safe_loading"),
        (),
    ),
    "tetraformer.safe_loading": (("torch", "tetraformer.errors"), ()),  # how payload and interop load torch files
    "tetraformer.data": (None, ("tetraformer.core", "tetraformer.training", "tetraformer.interop", "tasks")),
    "tetraformer.training": (None, ("tetraformer.interop", "tetraformer.cli", "tasks")),
    # demo data builders: plain files from packages; no model, training or Hugging Face code
    "tetraformer.demo_data": (
        None,
        ("tetraformer.core", "tetraformer.training", "tetraformer.interop", "tetraformer.cli", "tasks"),
    ),
    "tetraformer.cli": (None, ("tasks",)),  # the top of the graph: it may import any platform package
    "tetraformer": (None, ("tasks", "tetraformer.cli")),  # nothing under platform/ imports a task or the CLI
}


def module_name(path: Path, root: Path) -> str:
    """Dotted name of a source file under a source root (a package's __init__ is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import anywhere in the tree; `from a import b` yields `a.b`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing module's package
                package = module if is_package else module.rpartition(".")[0]
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                yield node.lineno, base if alias.name == "*" else f"{base}.{alias.name}"


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def rule_for(module: str) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """The rule of the most specific area a module belongs to."""
    area = max((a for a in RULES if _within(module, a)), key=len)
    return RULES[area]


def breaks_rule(module: str, name: str) -> bool:
    """Whether `module` importing `name` points against the design."""
    allowed, forbidden = rule_for(module)
    if any(_within(name, f) for f in forbidden):
        return True
    if allowed is None:
        return False
    return name.split(".")[0] not in STDLIB and not any(_within(name, a) for a in allowed)


def violations(root: Path) -> tuple[list[str], int]:
    """('file:line: module imports name' for each arrow against the design, number of imports checked)."""
    found, checked = [], 0
    for path in sorted((root / "tetraformer").rglob("*.py")):
        module = module_name(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in imported_names(tree, module, path.name == "__init__.py"):
            checked += 1
            if breaks_rule(module, name):
                found.append(f"{path.relative_to(root)}:{line}: {module} imports {name}")
    return found, checked


def test_platform_imports_point_one_way() -> None:
    """No module under platform/tetraformer imports against the design (and the walk saw the real tree)."""
    found, checked = violations(SOURCE_ROOT)
    assert checked > 200, f"only {checked} imports found under {SOURCE_ROOT}: the walk missed the tree"
    assert not found, "imports against DESIGN.md's direction:\n" + "\n".join(found)


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


CLEAN = {
    "tetraformer/__init__.py": "",
    "tetraformer/core/__init__.py": "import math\nimport torch\nfrom tetraformer.errors import TetraformerError\n",
    "tetraformer/accel/packed.py": "import torch\nfrom tetraformer.core.layers import Block\nfrom . import chooser\n",
    "tetraformer/data/files.py": "from pathlib import Path\nimport datasets\nfrom tetraformer.errors import X\n",
    "tetraformer/training/module.py": "import lightning\nfrom tetraformer.core import CausalLM\nfrom . import optim\n",
    "tetraformer/interop/convert.py": "from tetraformer.training.checkpoint import load_weights\n",
}


def test_walker_passes_a_tree_that_follows_the_design(tmp_path: Path) -> None:
    """A synthetic tree with only allowed arrows has no violations (and its imports are counted)."""
    for relative, text in CLEAN.items():
        write(tmp_path, relative, text)
    assert violations(tmp_path) == ([], 13)


@pytest.mark.parametrize(
    ("relative", "text", "expected"),
    [
        (
            "tetraformer/training/checkpoint.py",
            "def f():\n    from tetraformer.interop import load_hf\n",
            "tetraformer/training/checkpoint.py:2: tetraformer.training.checkpoint imports tetraformer.interop.load_hf",
        ),
        (
            "tetraformer/training/module.py",
            "def f():\n    if True:\n        import tetraformer.interop\n",
            "tetraformer/training/module.py:3: tetraformer.training.module imports tetraformer.interop",
        ),
        (
            "tetraformer/training/module.py",
            "from tetraformer import interop\n",
            "tetraformer/training/module.py:1: tetraformer.training.module imports tetraformer.interop",
        ),
        (
            "tetraformer/training/module.py",
            "from ..interop import registry\n",
            "tetraformer/training/module.py:1: tetraformer.training.module imports tetraformer.interop.registry",
        ),
        (
            "tetraformer/core/layers.py",
            "class A:\n    def f(self):\n        import numpy\n",
            "tetraformer/core/layers.py:3: tetraformer.core.layers imports numpy",
        ),
        (
            "tetraformer/core/generation.py",
            "from tetraformer.accel.decoding import decoding\n",
            "tetraformer/core/generation.py:1: tetraformer.core.generation imports tetraformer.accel.decoding.decoding",
        ),
        (
            "tetraformer/core/heads.py",
            "def f():\n    from tetraformer import accel\n",
            "tetraformer/core/heads.py:2: tetraformer.core.heads imports tetraformer.accel",
        ),
        (
            "tetraformer/accel/bf16_linear.py",
            "import lightning\n",
            "tetraformer/accel/bf16_linear.py:1: tetraformer.accel.bf16_linear imports lightning",
        ),
        (
            "tetraformer/accel/decoding.py",
            "from tetraformer.training import compile\n",
            "tetraformer/accel/decoding.py:1: tetraformer.accel.decoding imports tetraformer.training.compile",
        ),
        (
            "tetraformer/core/__init__.py",
            "from tetraformer.data import DataError\n",
            "tetraformer/core/__init__.py:1: tetraformer.core imports tetraformer.data.DataError",
        ),
        (
            "tetraformer/data/text.py",
            "from tetraformer.core.config import TransformerConfig\n",
            "tetraformer/data/text.py:1: tetraformer.data.text imports tetraformer.core.config.TransformerConfig",
        ),
        (
            "tetraformer/cli.py",
            "def main():\n    from tasks.language_modeling.module import LanguageModeling\n",
            "tetraformer/cli.py:2: tetraformer.cli imports tasks.language_modeling.module.LanguageModeling",
        ),
        (
            "tetraformer/payload.py",
            "import lightning\n",
            "tetraformer/payload.py:1: tetraformer.payload imports lightning",
        ),
    ],
)
def test_walker_names_each_arrow_against_the_design(tmp_path: Path, relative: str, text: str, expected: str) -> None:
    """One violation (at top level, in a function, relative or `from package import module`) is named file:line."""
    for clean, clean_text in CLEAN.items():
        write(tmp_path, clean, clean_text)
    write(tmp_path, relative, text)
    found, _ = violations(tmp_path)
    assert found == [expected]


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the platform modules it imports (anywhere in the file, TYPE_CHECKING blocks included)."""
    paths = sorted((root / "tetraformer").rglob("*.py"))
    modules = {module_name(path, root): path for path in paths}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names = (name for _, name in imported_names(tree, module, path.name == "__init__.py"))
        graph[module] = {_owner(name, modules) for name in names if _owner(name, modules) not in (None, module)}
    return graph


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module a dotted import name lives in (`a.b.C` -> `a.b`), or None outside the tree."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One path per import circle (a package importing its own submodules from __init__ is not one)."""
    found, done, stack = [], set(), []

    def visit(module: str) -> None:
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target in stack:
                loop = stack[stack.index(target) :] + [target]
                if not _init_reexport(loop):
                    found.append(loop)
            elif target not in done:
                visit(target)
        stack.pop()
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            visit(module)
    return found


def _init_reexport(loop: list[str]) -> bool:
    """A package's __init__ importing a submodule that imports a sibling through the package is no circle."""
    return any(b.startswith(a + ".") or a.startswith(b + ".") for a, b in zip(loop, loop[1:], strict=False))


def test_no_import_circles() -> None:
    """No module under platform/tetraformer reaches itself through its imports, function-local ones included."""
    graph = import_graph(SOURCE_ROOT)
    assert len(graph) > 100, "the walk missed the tree"
    assert not cycles(graph), "import circles:\n" + "\n".join(" -> ".join(loop) for loop in cycles(graph))


def test_cycle_finder_names_a_circle_hidden_in_a_function(tmp_path: Path) -> None:
    """Two modules importing each other, one of them inside a function, are found."""
    write(tmp_path, "tetraformer/__init__.py", "")
    write(tmp_path, "tetraformer/a.py", "from tetraformer.b import g\n")
    write(tmp_path, "tetraformer/b.py", "def g():\n    from tetraformer import a\n")
    write(tmp_path, "tetraformer/c.py", "from tetraformer.a import x\n")
    assert cycles(import_graph(tmp_path)) == [["tetraformer.a", "tetraformer.b", "tetraformer.a"]]


def script_import_graph(scripts: Path) -> dict[str, set[str]]:
    """Script (file stem) -> the other scripts it imports, anywhere in the file (run as `python scripts/x.py`, a
    script finds its siblings by bare name)."""
    paths = {path.stem: path for path in sorted(scripts.glob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        imported = {found.split(".")[0] for _, found in imported_names(tree, name, False)}
        graph[name] = (imported & set(paths)) - {name}
    return graph


def test_scripts_import_only_shared_modules_and_no_circle() -> None:
    """A script imports no other script but a shared module (bench_common, baselines_common, studies_common), and
    the script graph has 0 import circles."""
    graph = script_import_graph(SCRIPTS)
    assert len(graph) > 10, f"only {len(graph)} scripts found in {SCRIPTS}"
    found = cycles(graph)
    assert found == [], "import circles among scripts:\n" + "\n".join(" -> ".join(loop) for loop in found)
    sideways = sorted(f"{a} imports {b}" for a, targets in graph.items() for b in targets if not b.endswith("_common"))
    assert sideways == [], "scripts importing other scripts (share code through a *_common module):\n" + "\n".join(
        sideways
    )


def test_script_graph_finds_the_old_bench_circle(tmp_path: Path) -> None:
    """bench.py importing bench_long.py inside a function and bench_long.py importing bench.py back is a circle."""
    write(tmp_path, "bench.py", "import torch\n\ndef main():\n    import bench_long\n")
    write(tmp_path, "bench_long.py", "def cell():\n    from bench import make_step\n")
    write(tmp_path, "bench_common.py", "import torch\n")
    assert cycles(script_import_graph(tmp_path)) == [["bench", "bench_long", "bench"]]


def module_level_calls(path: Path) -> list[str]:
    """`file:line` of each statement at a module's top level that is a bare call (`register(SPEC)`, `hook()`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path}:{node.lineno}" for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    ]


def test_nothing_registers_itself_on_import() -> None:
    """No module runs a call at import (a registration, a hook): what a command can do never depends on what was
    imported before it. Registries are explicit lists read where they are used (payload.STARTING_POINTS,
    interop.registry.FAMILY_MODULES); only `python -m tetraformer.cli` calls main()."""
    roots = [SOURCE_ROOT / "tetraformer", SOURCE_ROOT.parent / "tasks"]
    calls = [call for root in roots for path in sorted(root.rglob("*.py")) for call in module_level_calls(path)]
    assert [c for c in calls if not c.endswith(("cli/__main__.py:5",))] == []


def test_the_call_finder_sees_a_registration(tmp_path: Path) -> None:
    """The walker above finds a top-level call, and ignores one inside a function."""
    path = tmp_path / "family.py"
    path.write_text("SPEC = 1\nregister(SPEC)\n\ndef f():\n    register(SPEC)\n", encoding="utf-8")
    assert module_level_calls(path) == [f"{path}:2"]
