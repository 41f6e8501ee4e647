"""Shared fixtures: tiny offline models and tokenizers, a per-test statistics cache.

`tests/` is a package (an `__init__.py` in every folder), so pytest puts the repository root on `sys.path` and
test modules with the same name in different folders (audit/test_online.py, app/test_online.py) do not clash.
Shared helpers live in `tests/support/` and are imported as `tests.support.<module>`.

`make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadgroup`); `pytest_collection_modifyitems`
below keeps the tests of a costly session server on one worker, so it starts once."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from _pytest.nodeid import coerce_node_id

from mia_core import LanguageModel
from mia_core.model.stats_cache import StatsCache

from tests.support.dashboard import running_dashboard
from tests.support.tiny import random_texts, tiny_gpt2, tiny_llama, tiny_tokenizer, train_causal_lm


#: Session fixtures of the servers the tests start, and the xdist group of the tests that use them: each group runs on
#: one worker, so each server starts once, not once per worker. The first fixture a test uses here names its group
#: (the served dashboard test needs the dashboard and a vLLM engine: it joins the engines' worker and starts a dashboard
#: there, as that costs about a second and an engine tens of seconds). The dashboard is found by `server_store`, which
#: `server` uses: other test modules have a `server` fixture of their own (a scripted HTTP server).
WORKER_GROUPS = {"vllm_demo": "vllm", "vllm_lora": "vllm", "vllm_merged": "vllm", "demo_known_merged": "vllm",
                 "vllm_book": "vllm", "server_store": "dashboard"}


def pytest_configure(config: pytest.Config) -> None:
    """On an xdist worker, torch computes on one thread: two workers of two threads each on two cores made the
    model-training tests 5-15 times slower (threads waiting on each other's core)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test that uses a server of `WORKER_GROUPS` with its xdist group (read by `--dist loadgroup`)."""
    for item in items:
        group = next((WORKER_GROUPS[name] for name in WORKER_GROUPS if name in item.fixturenames), None)
        if group and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(tryfirst=True)  # before the worker sends its collection to the scheduler
def pytest_collection_finish(session: pytest.Session) -> None:
    """Give each grouped test the `@group` ending of its id that `--dist loadgroup` schedules by.

    pytest-xdist 3.8.0 writes it to `item._nodeid`, which pytest 9.2 no longer reads (its ids are structured), so
    every test went to any worker, groups or not (pytest-xdist issue #1386). This sets the id the way pytest 9.2 keeps
    it; once pytest-xdist's own suffix shows in the id, it does nothing."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    for item in session.items:
        groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                         for mark in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid.rpartition("]")[2]:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")


@pytest.fixture
def tok():
    return tiny_tokenizer(300)


@pytest.fixture
def make_lm(tmp_path):
    """Factory: wrap a model and tokenizer as a LanguageModel with a private statistics cache."""

    def make(model, tokenizer, **kwargs):
        return LanguageModel(model, tokenizer, name="tiny", stats_cache=StatsCache(tmp_path / "stats"), **kwargs)

    return make


@pytest.fixture
def llama_lm(tok, make_lm):
    """Untrained tiny Llama whose logits (320) are wider than the tokenizer (300), like Pythia's."""
    return make_lm(tiny_llama(len(tok), seed=0, logits_width=320), tok)


@pytest.fixture
def gpt2_lm(make_lm):
    """Untrained tiny GPT-2 with a different tokenizer (280 tokens), e.g. as a reference model."""
    tok280 = tiny_tokenizer(280)
    return make_lm(tiny_gpt2(len(tok280), seed=1), tok280)


@pytest.fixture(scope="session")
def membership(tmp_path_factory):
    """A tiny Llama trained for seconds on 40 member texts; 40 held-out texts from the same source.

    `ref_lm` is a reference model with another tokenizer (for `ref`); `base_lm` is the untrained checkpoint the
    trained model started from, sharing its tokenizer (the same-token reference of EZ-MIA and WBC).
    Helper texts (never scored): 8 more trained members and 30 more held-out texts, for the methods
    that need known members or non-members (prefix shots, a reference population).
    """
    tok = tiny_tokenizer(300)
    texts = random_texts(118, seed=7)
    members, nonmembers = texts[:40], texts[40:80]
    helper_members, helper_nonmembers = texts[80:88], texts[88:]
    model = train_causal_lm(tiny_llama(len(tok), seed=1), tok, members + helper_members, steps=40, lr=5e-3)
    cache = StatsCache(tmp_path_factory.mktemp("membership-stats"))
    lm = LanguageModel(model, tok, name="tiny-trained", stats_cache=cache)
    ref_tok = tiny_tokenizer(280)
    ref_lm = LanguageModel(tiny_gpt2(len(ref_tok), seed=3), ref_tok, name="tiny-ref", stats_cache=cache)
    base_lm = LanguageModel(tiny_llama(len(tok), seed=1), tok, name="tiny-base", stats_cache=cache)  # before training
    return {"lm": lm, "ref_lm": ref_lm, "base_lm": base_lm, "members": members, "nonmembers": nonmembers,
            "helper_members": helper_members, "helper_nonmembers": helper_nonmembers}


@pytest.fixture(scope="session")
def memorising(tmp_path_factory):
    """A tiny Llama overfit on 8 member texts (150 steps, about 2 s) until it recites them; 8 held-out texts never seen.

    For the black-box methods, which read only sampled text: sampled from a member's prefix it copies the rest word
    for word (members' −mean NLL −0.025 to −0.045 nats per token, held-out texts' −7.6 to −10.5), where the
    `membership` model, trained 40 steps on 48 texts, copies no run of two words (N-gram coverage at L = 2, 4 samples
    each: 0 on all of 10 members and 10 held-out texts).
    """
    tok = tiny_tokenizer(300)
    texts = random_texts(16, seed=11, min_words=16, max_words=24)
    members, nonmembers = texts[:8], texts[8:]
    model = train_causal_lm(tiny_llama(len(tok), seed=2), tok, members, steps=150, lr=1e-2)
    lm = LanguageModel(model, tok, name="tiny-memorising", stats_cache=StatsCache(tmp_path_factory.mktemp("memo")))
    return {"lm": lm, "members": members, "nonmembers": nonmembers}


@pytest.fixture(scope="session")
def server_store(tmp_path_factory) -> Path:
    """The results store the browser tests' dashboard reads (MIA_LENS_STORE), shared with runs made by the tests."""
    return tmp_path_factory.mktemp("store") / "results.duckdb"


@pytest.fixture(scope="session")
def server(server_store):
    """The dashboard every browser test opens (`tests.support.dashboard`), its output in a log file beside the store:
    started once per session, as each test module's own server cost a start, its imports and its model loads."""
    with running_dashboard({"MIA_LENS_STORE": str(server_store)}, server_store.parent / "server.log") as url:
        yield url
