"""The Explore page through AppTest: scores and redraws without the model, methods that need an extra pass
computed on request (Infilling), GDS once the Benchmark page fitted a classifier, methods that need helper texts
once those are chosen; results greyed once the model or text changed, equal colours for equal scores under the
fixed scale, uploads into the text area (re-flowed, the pasted text kept), the exports."""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

import mia_core.methods.infilling.engine as engine
import ui.explore_text
import ui.helpers
from mia_core import METHODS, Score, datasets, load_model, score
from mia_core.inputs.documents import document_text
from mia_core.methods.gds.classifier import fit_classifier
from mia_core.methods.gds.features import GdsSettings, feature_names, features_loop
from mia_core.methods.labelled import split_record
from mia_core.api import MethodSpec, NoParams, lowest_k
from mia_core.api import AccessNeeds, TokenView  # the probe method's declarations
from mia_core.model.language_model import LanguageModel
from ui.stale import STALE_CSS

from tests.support.app import APP, app

pytestmark = pytest.mark.integration  # the page loads the cached demo model


def test_explore_scores_and_redraws_without_the_model(monkeypatch):
    calls = []
    original = LanguageModel._compute
    monkeypatch.setattr(LanguageModel, "_compute", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    at = app("app_pages/explore.py")
    at.text_area(key="explore_text").input("The <b>cat</b> sat on the mat.\nA second line & more.").run()
    at.button[0].click().run()
    assert not at.exception
    heatmaps = [h.proto.body for h in at.get("html")]
    assert any('id="heatmap-min_k_pp"' in h and "mia-legend" in h for h in heatmaps)
    assert all("<b>" not in h for h in heatmaps) and any("&lt;" in h for h in heatmaps)
    n_calls = len(calls)
    first = [m.value for m in at.metric]
    at.slider(key="explore_k").set_value(0.5).run()
    at.multiselect(key="explore_methods").set_value(["loss", "zlib"]).run()
    assert not at.exception and len(calls) == n_calls  # redrawn from cached statistics
    assert [m.label for m in at.metric] == [METHODS["loss"].label, METHODS["zlib"].label]
    assert first and len(at.get("html")) == 2


def test_explore_computes_extra_pass_methods_on_request_and_redraws_k(monkeypatch):
    calls = []
    original = engine.primed_fast
    monkeypatch.setattr(engine, "primed_fast", lambda *a, **kw: calls.append(1) or original(*a, **kw))

    def probe(stats, params, *, lm):  # a method whose details hold a table (rendered generically)
        rows = [{"text": "<b>neighbour</b>", "logprob": -1.25}]
        return Score(1.5, stats.logprob.astype(float), np.ones(stats.n_scored, bool), {"neighbors": rows, "n": 1})

    monkeypatch.setitem(METHODS, "probe", MethodSpec("probe", probe, NoParams, ("stats", "lm"), "Probe", "a test probe",
                                                     True, AccessNeeds(further_passes=True), "1 forward pass",
                                                     lambda v: f"probe {v}.", "p", "a test probe", TokenView()))
    text = "The cat sat on the mat. A second line & more."
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("app_pages/explore.py").run()
    at.text_area(key="explore_text").input(text).run()
    at.button[0].click().run()
    at.multiselect(key="explore_extra").set_value(["infilling", "probe"]).run()
    assert not at.exception and not calls  # nothing runs before the button
    assert not [m for m in at.metric if m.label == "Infilling Score"]
    run = at.button(key="explore_extra_run")
    assert "Infilling Score" in run.label and METHODS["infilling"].cost in run.help
    run.click().run()
    assert not at.exception and len(calls) == 1
    lm = load_model("demo")
    expected = score("infilling", lm.token_stats([text])[0], lm=lm, k=0.2)
    n_calls = len(calls)
    metrics_ = {m.label: m.value for m in at.metric}
    assert metrics_["Infilling Score"] == f"{expected.value:.4f}" and metrics_["Probe"] == "1.5000"
    assert any('id="heatmap-infilling"' in h.proto.body for h in at.get("html"))
    assert any("m: 1" in c.value for c in at.caption)  # ≤ 32 tokens: one future token
    assert at.dataframe[0].value["text"].tolist() == ["<b>neighbour</b>"]
    at.slider(key="explore_k").set_value(0.5).run()
    assert not at.exception and len(calls) == n_calls  # redrawn from the stored token scores
    now = lowest_k(expected.token_scores, 0.5).value
    assert {m.label: m.value for m in at.metric}["Infilling Score"] == f"{now:.4f}"


def test_explore_offers_gds_once_benchmark_fitted_one():
    """Explore lists a supervised method (GDS) only once fitted in this session for the current model, and scores
    with that fit."""
    lm = load_model("demo")
    rng = np.random.default_rng(0)
    y = np.array([1, 0] * 12)
    features = rng.normal(size=(y.size, len(feature_names(lm.model)))) + y[:, None] * 0.5
    split = split_record(y, np.arange(y.size), np.array([], int), None, train_fraction=1.0, seed=0, source="test")
    classifier = fit_classifier(features, y, lm, settings=GdsSettings(), seed=0, split=split)
    text = "The cat sat on the mat. A second line & more."
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("app_pages/explore.py").run()
    assert not [o for o in at.multiselect(key="explore_extra").options if "GDS" in o]
    assert any("fit it on the Benchmark page" in c.value for c in at.caption)
    at.session_state["supervised_fits"] = {"model": at.session_state["model_spec"], "methods": {"gds": classifier}}
    at.text_area(key="explore_text").input(text).run()
    at.button[0].click().run()
    assert [o for o in at.multiselect(key="explore_extra").options if "GDS" in o]
    at.multiselect(key="explore_extra").set_value(["gds"]).run()
    at.button(key="explore_extra_run").click().run()
    assert not at.exception
    expected = classifier.log_odds(features_loop(lm, [text], GdsSettings()))[0]  # the one-text loop: independent
    shown = {m.label: float(m.value) for m in at.metric}["GDS (supervised)"]
    assert shown == pytest.approx(expected, abs=1e-3)
    assert any("uses its fit from the Benchmark page" in c.value for c in at.caption)


def naive_recall(model, tokenizer, shots: list[str], text: str) -> float:
    """ReCaLL from raw logits: mean log p of the text's tokens after the joined shots over their plain mean."""
    boundary = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    prefix, own = [boundary] + tokenizer("".join(shots))["input_ids"], [boundary] + tokenizer(text)["input_ids"]

    def mean_logprob(ids: list[int], start: int) -> float:  # tokens ids[start:] given everything before them
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)  # (T, vocab)
        return float(np.mean([logp[t - 1, ids[t]].item() for t in range(start, len(ids))]))

    return mean_logprob(prefix + own, len(prefix) + 1) / mean_logprob(own, 1)


def test_explore_offers_helper_methods_once_helper_texts_are_chosen(tiny_app, tiny_model_dir, monkeypatch):
    """Without helper texts ReCaLL, Con-ReCall and CAMIA are listed as unavailable with what they need; with the
    built-in demo-wiki set they score, the explored text is left out of the known texts, and the reference
    population's statistics are computed once."""
    calls = []
    original = ui.helpers.reference_stats
    monkeypatch.setattr(ui.helpers, "reference_stats", lambda *a, **kw: calls.append(1) or original(*a, **kw))
    sample = datasets.sample_per_class(datasets.load("demo-wiki"), 5)
    non = sample.loc[sample["label"] == 0, "text"].tolist()
    at = tiny_app("app_pages/explore.py")
    helper_labels = [METHODS[m].label for m in ("recall", "con_recall", "camia")]
    offered = at.multiselect(key="explore_extra").options
    assert not [o for o in offered if any(o.startswith(label + " (") for label in helper_labels)]
    waiting = " ".join(c.value for c in at.caption if c.value.startswith("Unavailable until helper texts"))
    assert "ReCaLL: known non-members (prefix shots)" in waiting and "CAMIA (single-pass): reference population" in waiting
    at.radio(key="explore_helper_source").set_value("A built-in labelled set").run()
    at.number_input(key="explore_helper_n").set_value(5).run()
    lm = load_model(str(tiny_model_dir))
    for text in ("The cat sat on the mat.", "A second short line, and more."):
        at.text_area(key="explore_text").input(text).run()
        at.button[0].click().run()
        at.multiselect(key="explore_extra").set_value(["camia"]).run()
        at.button(key="explore_extra_run").click().run()
        assert not at.exception, at.exception
        expected = score("camia", lm.token_stats([text])[0], lm=lm, reference=non).value  # all five non-members
        assert float({m.label: m.value for m in at.metric}["CAMIA (single-pass)"]) == pytest.approx(expected, abs=1e-4)
    assert len(calls) == 1  # the second text reused the population's statistics
    at.text_area(key="explore_text").input(non[0]).run()  # a known non-member explored: not its own prefix
    assert any("left out of them" in c.value for c in at.caption)
    at.button[0].click().run()
    at.multiselect(key="explore_extra").set_value(["recall"]).run()
    at.number_input(key="explore_n_shots").set_value(2).run()
    at.button(key="explore_extra_run").click().run()
    assert not at.exception, at.exception
    shown = next(result[1] for key, result in at.session_state["explore_extra_results"]["results"].items()
                 if key[0] == "recall")
    expected = naive_recall(lm.model, lm.tokenizer, non[1:3], non[0])
    assert shown.value == pytest.approx(expected, rel=1e-5)
    assert {m.label: m.value for m in at.metric}["ReCaLL"] == f"{shown.value:.4f}"
    assert any('id="heatmap-recall"' in h.proto.body and "the prefix cost this token likelihood" in h.proto.body
               for h in at.get("html"))


# --- issue 15: results in context (stale stamp), colours that compare, uploads, exports -------------------------------

SPAN = re.compile(r'<span class="mia-tok" style="background:rgb\((\d+),(\d+),(\d+)\)')


def score_button(at: AppTest):
    return next(b for b in at.button if b.label == "Score")


def heatmap_colours(at: AppTest, method: str) -> list[tuple[int, int, int]]:
    """The token colours of one method's heatmap, in token order."""
    body = next(h.proto.body for h in at.get("html") if f'id="heatmap-{method}"' in h.proto.body)
    return [tuple(int(c) for c in m) for m in SPAN.findall(body)]


def naive_rgb(value: float, low: float, high: float) -> tuple[int, int, int]:
    """The diverging colour by hand: white at the midpoint, blue (33,102,172) at `low`, red (178,24,43) at `high`."""
    mid = (low + high) / 2
    value = min(max(value, low), high)
    end, t = ((33, 102, 172), (mid - value) / (mid - low)) if value <= mid else ((178, 24, 43), (value - mid) / (high - mid))
    return tuple(round(247 + (e - 247) * t) for e in end)


def test_explore_greys_results_after_a_model_or_text_switch(tiny_app, tiny_model_dir, second_model_dir):
    text = "The cat sat on the mat."
    at = tiny_app("app_pages/explore.py")
    at.text_area(key="explore_text").input(text).run()
    score_button(at).click().run()
    assert not at.exception, at.exception
    assert not at.warning and not any(STALE_CSS in h.proto.body for h in at.get("html"))
    first = {m.label: m.value for m in at.metric}
    short = hashlib.sha256(text.encode()).hexdigest()[:8]
    assert any(short in m.value and "fingerprint" in m.value for m in at.markdown)  # the stamp beside the numbers
    at.text_input(key="model_other").input(str(second_model_dir)).run()
    assert not at.exception, at.exception
    warning = " ".join(w.value for w in at.warning)
    assert "computed for model" in warning and short in warning and "the model changed" in warning
    assert "press Score to recompute" in warning
    assert {m.label: m.value for m in at.metric} == first  # the old results stay, greyed
    assert any(STALE_CSS in h.proto.body for h in at.get("html"))
    score_button(at).click().run()
    assert not at.warning and {m.label: m.value for m in at.metric} != first  # the new model's numbers
    lm = load_model(str(second_model_dir))
    expected = score("min_k", lm.token_stats([text])[0], k=0.2).value
    assert {m.label: m.value for m in at.metric}[METHODS["min_k"].label] == f"{expected:.4f}"
    at.text_area(key="explore_text").input("A different text now.").run()
    assert "the text changed" in " ".join(w.value for w in at.warning)


def test_explore_fixed_scale_gives_equal_scores_equal_colours_across_texts(tiny_app, tiny_model_dir):
    """Two texts sharing a prefix share its tokens' log p: under the fixed scale (min_k's declared range) those tokens
    get identical colours, computed by hand; under "this text" they do not."""
    short = "The cat sat on the mat."
    long = short + " Then many other words followed it, one after another, for quite a while."
    lm = load_model(str(tiny_model_dir))
    logprob = lm.token_stats([short])[0].logprob
    low, high = METHODS["min_k"].token_range
    at = tiny_app("app_pages/explore.py")
    shown = {}
    for how in ("fixed per method", "this text"):
        at.radio(key="explore_scale").set_value(how).run()
        for text in (short, long):
            at.text_area(key="explore_text").input(text).run()
            score_button(at).click().run()
            assert not at.exception, at.exception
            shown[how, text] = heatmap_colours(at, "min_k")[:len(logprob)]
        legend = next(h.proto.body for h in at.get("html") if 'id="heatmap-min_k"' in h.proto.body)
        assert f"Scale: {'fixed for' if how.startswith('fixed') else 'this text'}" in legend
    assert shown["fixed per method", short] == shown["fixed per method", long] == [naive_rgb(v, low, high)
                                                                                  for v in logprob]
    assert shown["this text", short] != shown["this text", long]


def test_explore_upload_fills_the_text_area_reflowed_and_removing_it_restores_the_pasted_text(tiny_app, monkeypatch):
    current = {"file": None}
    monkeypatch.setattr(ui.explore_text, "upload_widget", lambda: current["file"])
    at = tiny_app("app_pages/explore.py")
    at.text_area(key="explore_text").input("my own pasted words").run()
    pdf = lines_pdf(["A study of exam-", "ples in PDF", "text. Second", "line here."])
    assert document_text("paper.pdf", pdf) == "A study of exam-\nples in PDF\ntext. Second\nline here."  # as extracted
    current["file"] = FakeUpload("paper.pdf", pdf)
    at.run()
    assert not at.exception, at.exception
    assert at.text_area(key="explore_text").value == "A study of examples in PDF text. Second line here."
    assert any("re-flowed" in c.value for c in at.caption)
    at.text_area(key="explore_text").input("An edited upload.").run()  # editable: the edit is what gets scored
    score_button(at).click().run()
    assert at.session_state["explore_request"][1] == "An edited upload."
    current["file"] = None
    at.run()
    assert at.text_area(key="explore_text").value == "my own pasted words"


def test_explore_offers_the_exports_under_the_results(tiny_app):
    at = tiny_app("app_pages/explore.py")
    at.text_area(key="explore_text").input("The <b>cat</b> sat.").run()
    score_button(at).click().run()
    labels = [e.proto.label for e in at.get("download_button")]
    assert labels == ["Per-token table (CSV)", "Heatmaps (standalone HTML)"]


class FakeUpload:
    """What `st.file_uploader` returns for one file, without a browser."""

    def __init__(self, name: str, data: bytes):
        self.name, self._data, self.file_id, self.size = name, data, hashlib.sha256(data).hexdigest(), len(data)

    def getvalue(self) -> bytes:
        return self._data


def lines_pdf(lines: list[str]) -> bytes:
    """A one-page PDF with one text line per entry (pypdf extracts them with line breaks), built by hand."""
    shown = b" T* ".join(b"(%s) Tj" % line.encode() for line in lines)
    content = b"BT /F1 10 Tf 12 TL 10 190 Td " + shown + b" ET"
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Contents 4 0 R /Resources << /Font << /F1 "
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>",
               b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content)]
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_explore_keeps_a_pasted_text_across_a_visit_to_another_page(tiny_app):
    """Streamlit drops a widget's state when a page without it runs: the pasted text is kept apart and comes back."""
    at = tiny_app("app_pages/explore.py")
    at.text_area(key="explore_text").input("a text I pasted and do not want to paste again").run()
    at.switch_page("app_pages/learn.py").run()
    assert not at.exception, at.exception
    at.switch_page("app_pages/explore.py").run()
    assert not at.exception, at.exception
    assert at.text_area(key="explore_text").value == "a text I pasted and do not want to paste again"
