"""The import graph of mia_core, built from the source with `ast`: no circles, and no import hidden in a function."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mia_core"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(importer: str, is_package: bool, node: ast.ImportFrom | ast.Import, known: set[str]) -> list[str]:
    """The mia_core modules an import statement loads (a `from pkg import module` counts the module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "mia_core"]
    if node.level:
        base = importer.split(".") if is_package else importer.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "mia_core":
        return []
    found = [target] if target in known else []
    return found + [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]


def import_graph() -> tuple[dict[str, set[str]], list[str]]:
    """(module → modules it imports at module level, imports of mia_core modules made inside functions)."""
    mods = modules()
    graph, hidden = {}, []
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = resolve(name, path.name == "__init__.py", node, set(mods))
                inside = any(isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef))
                             for parent in ancestors(tree, node))
                if inside and targets:
                    hidden.append(f"{name}:{node.lineno} imports {', '.join(targets)} inside a function")
                edges |= set(targets)
        graph[name] = edges - {name}
    return graph, hidden


def ancestors(tree: ast.AST, target: ast.AST) -> list[ast.AST]:
    """The nodes enclosing `target` (parents are not stored by `ast`)."""
    path: list[ast.AST] = []

    def visit(node: ast.AST, trail: list[ast.AST]) -> bool:
        if node is target:
            path.extend(trail)
            return True
        return any(visit(child, trail + [node]) for child in ast.iter_child_nodes(node))

    visit(tree, [])
    return path


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), i.e. every import circle."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Edges into a package's own `__init__` from its submodules are Python's loading order, not a dependency."""
    return {m: {t for t in edges if not m.startswith(t + ".")} for m, edges in graph.items()}


def test_the_graph_sees_the_known_dependencies():
    graph, _ = import_graph()
    assert "mia_core.api.token_stats" in graph["mia_core.api.score"]
    assert "mia_core.scoring" in graph["mia_core.runs.backends"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles():
    graph, _ = import_graph()
    assert cycles(without_package_inits(graph)) == []


def test_no_mia_core_import_hidden_inside_a_function():
    _, hidden = import_graph()
    assert hidden == []


@pytest.mark.parametrize("low, high", [("mia_core.api", "mia_core.model"), ("mia_core.api", "mia_core.methods"),
                                       ("mia_core.api", "mia_core.scoring"), ("mia_core.model", "mia_core.methods"), ("mia_core.methods", "mia_core.scoring"),
                                       ("mia_core.scoring", "mia_core.runs"), ("mia_core.scoring", "mia_core.audit"),
                                       ("mia_core.runs", "mia_core.audit"), ("mia_core.model", "mia_core.inputs")])
def test_dependencies_point_down(low, high):
    graph, _ = import_graph()
    upward = [f"{m} → {t}" for m, edges in graph.items() if m.startswith(low) for t in edges if t.startswith(high)]
    assert upward == []


def test_every_module_imports_alone_in_a_fresh_interpreter():
    names = [n for n in modules() if not n.endswith("__main__")]
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(n)\n"
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_contracts_load_without_torch():
    """`mia_core.api` (TokenStats, Score, the registry, model access) is NumPy only: a served model or a report uses it
    without loading torch."""
    code = "import sys, mia_core.api; assert 'torch' not in sys.modules, 'torch'; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert done.stdout.strip() == "ok", done.stderr
