"""pyproject.toml is the one list of what MIA Lens needs: every package of mia_core ships, what mia_core imports when
it runs is a declared dependency (the dashboard's imports one of its extra), and requirements.txt installs it all."""
from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: Optional accelerators imported in a `try` that no extra installs (triton comes with CUDA builds of torch).
UNDECLARED = {"triton"}
#: The exceptions of a `try` around an import that make the import optional.
MISSING_PACKAGE = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def normalized(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(requirements: list[str]) -> set[str]:
    """The distribution names of requirement strings (`ray[data]==2.60.0` → `ray`)."""
    return {normalized(re.match(r"[A-Za-z0-9._-]+", req).group()) for req in requirements}


CORE = declared(PROJECT["project"]["dependencies"])
EXTRAS = {extra: declared(reqs) for extra, reqs in PROJECT["project"]["optional-dependencies"].items()}
DISTRIBUTIONS = importlib.metadata.packages_distributions()
LOCAL = {"mia_core", "ui", "app_pages", "__future__"}


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(top-level modules `path` imports whenever it is imported, those it imports only on use or guarded): an import in
    a function, or in a `try` that catches a missing package, is optional; `deferred("mod")` loads on use, yet always
    when its owner runs, so it counts as always; nothing under `if TYPE_CHECKING`."""
    tree = ast.parse(path.read_text())
    always: set[str] = set()
    optional: set[str] = set()

    def visit(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child, lazy)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lazy = True
        if isinstance(node, ast.Try) and any(MISSING_PACKAGE & set(re.findall(r"\w+", ast.unparse(h.type or ast.Name(
                "BaseException")))) for h in node.handlers):
            for child in node.body:
                visit(child, True)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, lazy)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "deferred"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names = [node.args[0].value]
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in LOCAL:
                (optional if lazy else always).add(top)
        for child in ast.iter_child_nodes(node):
            visit(child, lazy)

    visit(tree, False)
    return always, optional - always


def providers(module: str) -> set[str]:
    """The installed distributions that provide a top-level module."""
    return {normalized(name) for name in DISTRIBUTIONS.get(module, [])}


def undeclared(files: list[Path], allowed: set[str], *, optional: bool) -> list[str]:
    """`file: module` for each import of `files` (always-imports, or the optional ones) that `allowed` does not
    provide."""
    out = []
    for path in files:
        for module in sorted(imports(path)[1 if optional else 0]):
            if module not in UNDECLARED and not providers(module) & allowed:
                out.append(f"{path.relative_to(ROOT)}: {module} (from {sorted(providers(module)) or 'nothing installed'})")
    return out


def test_what_mia_core_always_imports_is_a_dependency():
    assert undeclared(sorted((ROOT / "mia_core").rglob("*.py")), CORE, optional=False) == []


def test_what_mia_core_imports_on_use_is_a_dependency_or_in_an_extra():
    every = CORE.union(*EXTRAS.values())
    assert undeclared(sorted((ROOT / "mia_core").rglob("*.py")), every, optional=True) == []


def test_mia_core_never_imports_streamlit():
    found = [path for path in (ROOT / "mia_core").rglob("*.py") if "streamlit" in set().union(*imports(path))]
    assert found == []


def test_the_dashboard_needs_only_its_extra():
    files = [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]
    allowed = CORE | EXTRAS["dashboard"]
    assert undeclared(files, allowed, optional=False) + undeclared(files, allowed, optional=True) == []


def package_folder(name: str) -> Path:
    """The folder setuptools builds package `name` from: its own or its closest parent's `package-dir` entry."""
    mapped = PROJECT["tool"]["setuptools"]["package-dir"]
    parts = name.split(".")
    mapped_prefix = next((i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in mapped), 0)
    base = ROOT / mapped[".".join(parts[:mapped_prefix])] if mapped_prefix else ROOT
    return base.joinpath(*parts[mapped_prefix:]).resolve()


def test_every_package_of_mia_core_ships():
    listed = set(PROJECT["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "mia_core").rglob("__init__.py")}
    assert found - listed == set(), "add them to [tool.setuptools] packages in pyproject.toml"
    folders = {name: package_folder(name) for name in listed}
    assert folders["mia_lens_dashboard.ui"] == ROOT / "ui" and (folders["mia_lens_dashboard"] / "app.py").is_file()
    assert [name for name, folder in folders.items() if not folder.is_dir()] == []


def test_requirements_install_the_package_with_every_extra():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert len(lines) == 1 and lines[0].startswith("-e .[") and lines[0].endswith("]"), lines
    assert set(lines[0][len("-e .["):-1].split(",")) == set(EXTRAS)
