"""ui/reference_view.py: uploaded known non-members are scored once, kept in the cache, and read (not scored) by a
later session; the page says where they are kept."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from mia_core import LanguageModel, load_model, score_texts
from mia_core.reference import references_dir

from ui.reference_jobs import reference_jobs

from tests.support.tiny import random_texts

PAGE = '''
import streamlit as st

from tests.support.tiny import random_texts
from ui.reference_view import TEXTS, PendingReference, resolve_reference

texts = tuple(random_texts(8, seed=21))
reference = resolve_reference((TEXTS, (texts, "known<b>.csv")), st.session_state["spec"], ["loss"], None, "auto")
if isinstance(reference, PendingReference):  # scored in the background: the test waits for it, then reruns
    st.write("pending")
else:
    st.write(f"size={reference.size}")
    st.write("loss=" + ",".join(repr(v) for v in reference.table["loss"]))
'''


def session(tmp_path: Path, spec: str) -> AppTest:
    script = tmp_path / "reference_page.py"
    script.write_text(PAGE)
    at = AppTest.from_file(str(script), default_timeout=120)
    at.session_state["spec"] = spec
    at.run()
    if "pending" in [m.value for m in at.markdown]:
        for job in list(reference_jobs().values()):
            job.thread.join(120)
        at.run()
    return at


def shown_scores(at: AppTest) -> list[float]:
    line = next(m.value for m in at.markdown if m.value.startswith("loss="))
    return [float(v) for v in line.removeprefix("loss=").split(",")]


def test_uploaded_non_members_are_kept_and_a_later_session_reads_them(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    spec = str(tiny_model_dir)
    first = session(tmp_path, spec)
    assert not first.exception, first.exception
    assert "size=8" in [m.value for m in first.markdown]
    kept = [c.value for c in first.caption if "kept in this server's MIA Lens cache" in c.value]
    assert kept and "later sessions reuse them" in kept[0] and str(tmp_path) not in kept[0]  # no server path shown
    assert len(list(references_dir().glob("*/scores.csv"))) == 1
    direct = score_texts(load_model(spec), random_texts(8, seed=21), ["loss"])["loss"].to_numpy()
    np.testing.assert_allclose(shown_scores(first), direct, rtol=1e-12)

    def no_scoring(*args, **kwargs):
        raise AssertionError("a later session scored the reference texts again")

    monkeypatch.setattr(LanguageModel, "token_stats", no_scoring)
    second = session(tmp_path, spec)  # a new session: its scores come from the cache folder
    assert not second.exception, second.exception
    assert shown_scores(second) == shown_scores(first)
