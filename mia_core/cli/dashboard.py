"""`mia app`: the dashboard, served by Streamlit on this machine, from any folder.

The wheel ships the dashboard as the package `mia_lens_dashboard` (app.py, app_pages/, ui/ and .streamlit/config.toml);
a checkout serves its own root's app.py. Streamlit reads the `.streamlit/config.toml` beside the script it runs, so the
server settings of docs/security.md (no tracebacks for visitors, the upload cap, no file watcher, no toolbar) apply wherever
`mia app` starts; the address and port come from the options. mia_core never imports Streamlit: the command replaces
itself with `python -m streamlit run`, so Ctrl-C and a signal reach the server itself.
"""
from __future__ import annotations

import importlib.util
import ipaddress
import os
import sys
from pathlib import Path

import typer

from .app import fail
from .terminal import echo

#: Where `pip install` puts the dashboard (pyproject.toml maps the repository's app.py, app_pages/ and ui/ onto it).
PACKAGE = "mia_lens_dashboard"
#: The repository root of a checkout (this file is mia_core/cli/dashboard.py).
CHECKOUT = Path(__file__).resolve().parents[2]
INSTALL_HINT = 'the dashboard needs the extra: pip install "mia-lens[dashboard]"'

commands = typer.Typer()


@commands.command("app")
def serve_dashboard(
    address: str = typer.Option("127.0.0.1", "--address", help="address to listen on; anything but loopback exposes "
                                "the dashboard (no login) to whoever reaches it: see the security page"),
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="port to listen on"),
) -> None:
    """Open the dashboard: Streamlit serves it on this machine (needs mia-lens's dashboard extra)."""
    if importlib.util.find_spec("streamlit") is None:
        fail(INSTALL_HINT)
    if not is_loopback(address):
        echo(f"warning: --address {address} serves the dashboard beyond this machine, with no login: visitors load any "
             "model folder the server can read and see every stored run (see the security page)", err=True)
    command = streamlit_command(dashboard_script(), address, port)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)


def dashboard_script() -> Path:
    """The dashboard's app.py: the installed package's, else this checkout's (an editable install maps both to it)."""
    spec = importlib.util.find_spec(PACKAGE)
    folders = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    script = next((folder / "app.py" for folder in [*folders, CHECKOUT] if (folder / "app.py").is_file()
                   and (folder / "app_pages").is_dir() and (folder / "ui").is_dir()), None)
    if script is None:
        fail(f"the dashboard's files are missing ({PACKAGE} is not installed): reinstall mia-lens")
    return script


def streamlit_command(script: Path, address: str, port: int) -> list[str]:
    """The command line that serves `script` on `address`:`port` with this interpreter's Streamlit."""
    return [sys.executable, "-m", "streamlit", "run", str(script), "--server.address", address,
            "--server.port", str(port)]


def is_loopback(address: str) -> bool:
    """Whether `address` reaches this machine only (localhost, 127.0.0.0/8, ::1)."""
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
