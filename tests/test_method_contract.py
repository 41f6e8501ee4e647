"""The method contract, checked on the source: a method is one place.

Outside `mia_core/methods/` no dict and no by-name branch (an if/elif chain, or comparisons in one function) names two
or more registered methods (a table of methods kept beside the registry drifts from it: legend words, by-name
branches, per-method flags); a list of defaults or a teaching example may name methods. Inside it, no
module keeps a mutable memo at module level (what `prepare` computes reaches the scorer as its context, never through
a hidden channel). `functools` caches of pure lookups (a tokenizer's vocabulary table, wordfreq's frequencies) are
not memos of results and are allowed.
"""
from __future__ import annotations

import ast
from types import SimpleNamespace
from pathlib import Path

import pytest

from mia_core import METHODS
from mia_core.api.params import param_infos

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = [p for p in [*sorted((ROOT / "mia_core").rglob("*.py")), *sorted((ROOT / "ui").rglob("*.py")),
                       *sorted((ROOT / "app_pages").rglob("*.py")), ROOT / "app.py"]
           if "methods" not in p.relative_to(ROOT).parts]
MUTABLE_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "Counter", "deque"}


def method_names_in(node: ast.AST) -> set[str]:
    """Registered method names written as whole string literals anywhere under `node`."""
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value in METHODS}


def scopes(tree: ast.AST) -> list[ast.AST]:
    """The module and every function in it (a by-name branch is counted per scope)."""
    return [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))]


def own_nodes(scope: ast.AST):
    """The nodes of a scope, not those of functions nested in it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def tables_of_methods(tree: ast.AST) -> list[tuple[int, set[str]]]:
    """(line, names) of every dict whose keys or values name two or more methods, and of every scope whose
    comparisons (`name == "gds"`, `"ref" in methods`, an if/elif chain) test two or more methods by name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            names = {v.value for v in [*node.keys, *node.values] if isinstance(v, ast.Constant)
                     and isinstance(v.value, str) and v.value in METHODS}
            if len(names) >= 2:
                found.append((node.lineno, names))
    for scope in scopes(tree):
        tests = [n for n in own_nodes(scope) if isinstance(n, ast.Compare)]
        names = set().union(*(method_names_in(n) for n in tests)) if tests else set()
        if len(names) >= 2:
            found.append((min(n.lineno for n in tests if method_names_in(n)), names))
    return sorted(found, key=lambda item: item[0])


def test_the_check_sees_a_table_and_a_chain():
    code = ('VIEWS = {"loss": 1, "min_k": 2}\n'
            'def f(name, methods):\n    if name == "gds":\n        pass\n    elif name == "ref":\n        pass\n'
            'def g(methods):\n    if "ref" in methods:\n        pass\n    if "dc_pdd" in methods:\n        pass\n'
            'ONE = {"loss": 1}\nDEFAULT = ["loss", "min_k"]\n')
    assert [line for line, _ in tables_of_methods(ast.parse(code))] == [1, 3, 8]


@pytest.mark.parametrize("path", OUTSIDE, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_table_of_methods_outside_the_methods(path):
    found = tables_of_methods(ast.parse(path.read_text()))
    assert not found, f"{path.relative_to(ROOT)} names several methods: " + "; ".join(
        f"line {line}: {sorted(names)}" for line, names in found)


MUTATORS = {"update", "setdefault", "append", "extend", "pop", "popitem", "clear", "move_to_end", "add", "insert",
            "put", "remove", "discard"}


def module_memos(tree: ast.Module) -> list[str]:
    """Module-level state written at run time: a lock, or a container (or `…Memo`/`…Cache` object) that some code in
    the module mutates (item assignment, `update`, `setdefault`, …); constant tables are not memos."""
    containers, out = {}, []
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        value, targets = node.value, node.targets if isinstance(node, ast.Assign) else [node.target]
        call = value.func.attr if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) else (
            value.func.id if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) else None)
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if call in ("Lock", "RLock"):
            out += [f"line {node.lineno}: {n} (a lock)" for n in names]
        elif isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) \
                or call in MUTABLE_CALLS or (call or "").endswith(("Memo", "Cache")):
            containers.update({n: node.lineno for n in names})
    for node in ast.walk(tree):
        target = None
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            for t in (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]):
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    target = t.value.id
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                and isinstance(node.func.value, ast.Name):
            target = node.func.value.id
        if target in containers and target != "__all__":
            out.append(f"line {containers[target]}: {target} (written at line {node.lineno})")
    return sorted(set(out))


@pytest.mark.parametrize("path", sorted((ROOT / "mia_core" / "methods").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_level_memo_in_the_methods(path):
    memos = module_memos(ast.parse(path.read_text()))
    assert not memos, f"{path.relative_to(ROOT)} keeps mutable state at module level: {memos}"


def test_the_memo_check_sees_one():
    code = ("_MEMO = OrderedDict()\nCACHE = {}\nLOCK = threading.Lock()\nROLES = {'a': 1}\n"
            "def f(k, v):\n    _MEMO.update({k: v})\n    CACHE[k] = v\n    return ROLES[k]\n")
    assert module_memos(ast.parse(code)) == ["line 1: _MEMO (written at line 6)", "line 2: CACHE (written at line 7)",
                                             "line 3: LOCK (a lock)"]


def test_every_method_declares_the_passes_it_adds_to_the_statistics_pass():
    """The dashboard's cost estimate reads each method's `extra_passes`: more than none exactly for the methods that run
    a model again (the target `lm`, the lowercased text, a reference model), none for those that read statistics."""
    runs_a_model = {"lm", "lowercase_stats", "ref_stats", "ref_same_token_stats"}
    for name, spec in METHODS.items():
        passes = spec.extra_passes(SimpleNamespace(**{i.name: i.default for i in param_infos(spec.params)}))
        assert (passes > 0) == bool(runs_a_model & set(spec.needs)), (name, passes, spec.needs)
