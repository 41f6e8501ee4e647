"""The README's served-model example works as written: `make serve-demo` is how `vllm_demo` starts its engine (the
fixture runs that very target, on a free port), and the README's `mia models check` line, pointed at that port,
probes it and lists the methods it allows."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.support.cli_runner import run_cli

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_served_lines() -> list[str]:
    """The commands of README's code block that starts with `make serve-demo` (comments dropped)."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    block = next(b for b in blocks if b.startswith("make serve-demo"))
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def test_readme_serves_the_demo_and_checks_it_as_written(vllm_demo):
    serve, check = readme_served_lines()
    assert serve == "make serve-demo"  # what the fixture ran (tests/served/conftest.py), with VLLM_PORT set
    args = shlex.split(check)
    assert args[:3] == ["mia", "models", "check"] and args[3] == "http://127.0.0.1:8000/v1?model=demo"
    port = vllm_demo.url.rsplit(":", 1)[1]
    code, out, err = run_cli(*args[1:3], args[3].replace(":8000/", f":{port}/"))
    assert code == 0, err
    allowed = re.search(r"^demo allows \d+ of \d+ methods: (.*)$", out, flags=re.M)
    assert allowed and {"loss", "zlib", "min_k"} <= set(allowed.group(1).split(", ")), out
