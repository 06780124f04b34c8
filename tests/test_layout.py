"""The library's layout: packages follow the chapter, imports point down the layers, nothing imports the book.

Read from the source (every import statement, those inside functions too), so a module added later is
held to the same rules without being listed here. ARCHITECTURE.md draws the same layers.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib"
PACKAGE = LIB / "inferlab"

#: Layers from the ground up; a module may import its own layer's group or any lower layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("inferlab", "units", "hardware", "models", "datasets", "_validate", "headless"),   # ground and tooling
    ("memory", "roofline", "symbolic", "timeline", "calibration", "example", "workloads"),  # closed-form, 8.1-8.2
    ("scheduling", "kvcache", "compression"),  # 8.2, 8.3, 8.4
    ("speculative", "kernels"),  # 8.5; attention with real tensors
    ("serving", "gpu"),  # 8.6; GPU measurements
    ("exercises",),
    ("book",),  # presentation: may import everything, imported by nothing
)
#: In these layers the top-level modules form one group and may import each other (without cycles);
#: in the others each package is its own group and does not import its neighbours in the layer.
SHARED_LAYERS = (0, 1)
#: Third-party packages only the GPU code imports, and only when a GPU cell runs.
GPU_ONLY = ("torch", "triton")
#: Modules that import them at their top (a Triton kernel is defined at module level); others import these
#: only inside a function that runs them.
GPU_MODULES = ("inferlab.kernels.triton_paged",)
LONG_FILE_LINES = 500


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


#: Command-line entry points at the top level that belong to a package (``python -m inferlab.grade``).
ENTRY_POINTS = {"grade": "exercises"}


def _top(name: str) -> str:
    """The top-level part of inferlab a module belongs to ('inferlab.kvcache.radix' -> 'kvcache')."""
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else "inferlab"
    return ENTRY_POINTS.get(top, top)


def _layer(name: str) -> int:
    top = _top(name)
    for i, members in enumerate(LAYERS):
        if top in members:
            return i
    raise AssertionError(f"{name}: its part ({top!r}) is in no layer of tests/test_layout.py: place it there")


def _imports(name: str) -> list[tuple[str, int, bool]]:
    """(imported module or package, line, at module level) for every import of ``name``'s source."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top_level = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno, id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # "from pkg import module" imports the module
                sub = f"{target}.{alias.name}"
                out.append((sub if sub in MODULES else target, node.lineno, id(node) in top_level))
    return out


def _internal(target: str) -> str | None:
    """The inferlab module ``target`` names (a package's __init__ for a package), or None if outside."""
    return target if target in MODULES else None


def _group(name: str) -> str:
    layer = _layer(name)
    return f"layer {layer}" if layer in SHARED_LAYERS else _top(name)


def test_every_module_is_in_a_layer() -> None:
    for name in MODULES:
        _layer(name)


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for name in MODULES:
        for target, line, _ in _imports(name):
            if (dep := _internal(target)) is None or dep == "inferlab":
                continue
            if _layer(dep) > _layer(name) or (_layer(dep) == _layer(name) and _group(dep) != _group(name)):
                wrong.append(f"{name}:{line} imports {dep} (layer {_layer(name)} -> {_layer(dep)})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_nothing_outside_the_book_imports_it() -> None:
    wrong = [f"{name}:{line} imports {target}" for name in MODULES if _top(name) != "book"
             for target, line, _ in _imports(name) if target == "inferlab.book" or target.startswith("inferlab.book.")]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles() -> None:
    """Module-level imports form no cycle (a cycle makes import order matter)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name in MODULES:
        for target, _, top_level in _imports(name):
            if top_level and (dep := _internal(target)) and dep != name and dep != "inferlab":
                graph[name].add(dep)
    # a package's __init__ importing its own modules is how it exports them, not a cycle of the design
    for name in list(graph):
        if MODULES[name].name == "__init__.py":
            graph[name] = {d for d in graph[name] if not d.startswith(name + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(dep):] + [dep]))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for name in sorted(MODULES):
        if name not in state:
            visit(name)


def test_torch_and_triton_only_in_the_gpu_code_and_only_when_it_runs() -> None:
    wrong = []
    for name in MODULES:
        for target, line, top_level in _imports(name):
            if target.split(".")[0] in GPU_ONLY and name not in GPU_MODULES and (_top(name) != "gpu" or top_level):
                wrong.append(f"{name}:{line} imports {target}")
            if target in GPU_MODULES and top_level:
                wrong.append(f"{name}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", sorted(n for n, p in MODULES.items() if p.name == "__init__.py"))
def test_each_package_says_what_it_models_and_exports_its_names(name: str) -> None:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree)
    assert doc and len(doc.split("\n")[0]) > 20, f"{name}: no docstring saying which part of the chapter it models"
    if name != "inferlab":
        exported = [n for n in tree.body if isinstance(n, ast.Assign)
                    and any(getattr(t, "id", None) == "__all__" for t in n.targets)]
        assert exported, f"{name}: no __all__"


def test_no_module_repeats_its_package_name() -> None:
    wrong = [name for name in MODULES if "." in name.removeprefix("inferlab.")
             and name.rpartition(".")[0].rpartition(".")[2] in name.rpartition(".")[2]]
    assert not wrong, f"module names that repeat their package's: {wrong}"


def test_long_files_say_why() -> None:
    wrong = []
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LONG_FILE_LINES and "This file is long" not in (ast.get_docstring(ast.parse(text)) or ""):
            wrong.append(f"{path.relative_to(LIB)} ({text.count(chr(10))} lines)")
    assert not wrong, "files over 500 lines whose docstring does not say why ('This file is long ...'): " + str(wrong)


def test_the_layout_test_sees_a_violation(tmp_path, monkeypatch) -> None:
    """The rules bite: a closed-form model importing the scheduler, the book or the Triton kernel is caught."""
    fake = dict(MODULES)
    bad = tmp_path / "memory.py"
    bad.write_text("from .scheduling import simulate\nfrom inferlab.book import glue\n"
                   "from .kernels import triton_paged\n")
    fake["inferlab.memory"] = bad
    monkeypatch.setitem(globals(), "MODULES", fake)
    with pytest.raises(AssertionError, match="inferlab.memory:1 imports inferlab.scheduling"):
        test_imports_point_down_the_layers()
    with pytest.raises(AssertionError, match="inferlab.memory:2 imports inferlab.book"):
        test_nothing_outside_the_book_imports_it()
    with pytest.raises(AssertionError, match="inferlab.memory:3 imports inferlab.kernels.triton_paged"):
        test_torch_and_triton_only_in_the_gpu_code_and_only_when_it_runs()
