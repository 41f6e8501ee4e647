"""The CLI keeps the tokenizer's threads on (tokenising is several times faster with them) and still forks quietly."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from mia_core.cli.quiet import QUIET_ENVIRONMENT

FORK_AFTER_THREADS = textwrap.dedent("""
    import os, sys
    from mia_core.cli.quiet import quiet_libraries
    quiet_libraries()
    from tests.support.tiny import random_texts, tiny_tokenizer
    tok = tiny_tokenizer(300).backend_tokenizer
    tok.encode_batch(random_texts(4000, seed=1))  # the tokenizer's threads, used before the fork
    print("threads:", os.environ.get("TOKENIZERS_PARALLELISM", "on"), flush=True)
    pid = os.fork()
    if pid == 0:  # a forked child (a library's worker) tokenises too, and must neither hang nor warn
        ok = len(tok.encode_batch(random_texts(500, seed=2))) == 500
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
""")


def test_the_cli_leaves_the_tokenizer_threads_on_and_a_fork_after_them_is_quiet():
    assert "TOKENIZERS_PARALLELISM" not in QUIET_ENVIRONMENT
    env = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
    done = subprocess.run([sys.executable, "-c", FORK_AFTER_THREADS], capture_output=True, text=True, timeout=120,
                          env=env, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "threads: on"
    assert "fork" not in done.stderr.lower() and "parallelism" not in done.stderr.lower(), done.stderr
