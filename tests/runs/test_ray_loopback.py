"""A local Ray instance started by our code listens on loopback only, even when the CLI imported Ray first."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("ray") is None or importlib.util.find_spec("psutil") is None,
                                 reason='the Ray backend is optional: pip install "mia-lens[scale]"'),
              pytest.mark.xdist_group("ray")]  # one Ray instance at a time (tests/runs/test_ray.py)

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}

# The CLI's path: `--backend ray` checks that Ray is installed (importing it) before the run connects.
CLI_PATH = """
import json, psutil
from mia_core.cli.groups import Backend
from mia_core.runs.ray_driver import connect
Backend.checked("ray")
ray = connect(None)
me = psutil.Process()
pids = {me.pid} | {p.pid for p in me.children(recursive=True)}
listening = [(psutil.Process(c.pid).name(), c.laddr.ip, c.laddr.port) for c in psutil.net_connections("inet")
             if c.pid in pids and c.status == psutil.CONN_LISTEN]
print(json.dumps(listening))
ray.shutdown()
"""


def test_local_instance_listens_on_loopback_only(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_ADDRESS")}
    env.update(RAY_USAGE_STATS_ENABLED="0", MIA_LENS_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CLI_PATH], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    listening = json.loads(done.stdout.strip().splitlines()[-1])
    names = {name for name, _, _ in listening}
    assert "gcs_server" in names and "raylet" in names, listening  # the instance's own servers were seen
    assert {ip for _, ip, _ in listening} <= LOOPBACK, listening
