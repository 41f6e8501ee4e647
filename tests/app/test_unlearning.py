"""The Unlearning audit page through AppTest: chunk scores of two tiny models against a naive Min-K% in float64,
the refusal of one model under two names, and the unlearned model re-defaulted when the sidebar's model changes."""
from __future__ import annotations

import math
import shutil

import pytest
import torch
from transformers import AutoTokenizer, LlamaForCausalLM

from tests.support.tiny import tiny_llama, tiny_tokenizer

pytestmark = pytest.mark.integration  # the app loads the cached demo model first

TEXT = " ".join(["The river ran north past the old castle walls."] * 8)  # 72 words: three 24-word chunks


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory):
    """A second tiny Llama (other weights, same tokenizer): the "unlearned" model."""
    folder = tmp_path_factory.mktemp("tiny-unlearned")
    tok = tiny_tokenizer()
    tiny_llama(len(tok), seed=1, max_positions=2048).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def naive_min_k(folder, text: str, k: float = 0.2) -> float:
    """Min-K% Prob by hand: the boundary token prepended, float64 log-softmax, mean of the floor(k·n) lowest."""
    tok = AutoTokenizer.from_pretrained(folder)
    model = LlamaForCausalLM.from_pretrained(folder).eval()
    ids = [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()  # (T, vocab)
    logp = torch.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    lowest = sorted(logp.tolist())[:max(1, math.floor(k * len(logp)))]
    return sum(lowest) / len(lowest)


def fill(at, unlearned_dir) -> None:
    at.selectbox(key="unlearn_spec").set_value("other").run()
    at.text_input(key="unlearn_other").input(str(unlearned_dir)).run()
    at.text_area(key="unlearn_text").input(TEXT).run()
    at.number_input(key="unlearn_words").set_value(24).run()


def test_chunk_scores_of_two_models_match_a_naive_min_k(tiny_app, tiny_model_dir, other_model_dir):
    at = tiny_app("app_pages/unlearning.py")
    fill(at, other_model_dir)
    at.button(key="unlearn_run").click().run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value  # the suspects; the CSV holds them all
    result = at.session_state["unlearn_result"]["table"]
    assert len(result) == 3 and len(table) == int(result["suspect"].sum())
    for _, row in result.iterrows():
        original, unlearned = naive_min_k(tiny_model_dir, row["text"]), naive_min_k(other_model_dir, row["text"])
        assert row["score_original"] == pytest.approx(original, rel=1e-4)
        assert row["score_unlearned"] == pytest.approx(unlearned, rel=1e-4)
        assert row["ratio"] == pytest.approx(unlearned / original, rel=1e-4)  # the paper's unlearned/original
        assert row["suspect"] == (1 / 1.15 < unlearned / original < 1.15)


def test_the_same_model_as_original_and_unlearned_is_refused(tiny_app, tiny_model_dir, tmp_path):
    at = tiny_app("app_pages/unlearning.py")
    fill(at, tiny_model_dir)  # the sidebar's own folder
    assert at.button(key="unlearn_run").disabled
    assert any("is the original" in w.value for w in at.warning)
    copy = shutil.copytree(tiny_model_dir, tmp_path / "same-weights")  # another name, the same fingerprint
    at.text_input(key="unlearn_other").input(str(copy)).run()
    assert not at.button(key="unlearn_run").disabled
    at.button(key="unlearn_run").click().run()
    assert not at.exception, at.exception
    assert any("are the same model" in w.value for w in at.warning)
    assert "unlearn_result" not in at.session_state and not at.dataframe


def test_unlearned_model_re_defaults_when_the_sidebar_model_changes(tiny_app, tiny_model_dir, other_model_dir):
    at = tiny_app("app_pages/unlearning.py")
    assert at.selectbox(key="unlearn_spec").value == "other"  # a folder as original: its pair is a name to enter
    at.selectbox(key="unlearn_spec").set_value("demo").run()
    at.text_input(key="model_other").input(str(other_model_dir)).run()  # another original
    assert at.selectbox(key="unlearn_spec").value == "other" and at.text_input(key="unlearn_other").value == ""
    at.radio(key="model_choice").set_value("demo").run()
    assert at.selectbox(key="unlearn_spec").value == "demo-known"
    at.selectbox(key="unlearn_spec").set_value("demo").run()  # the sidebar's model: refused until changed
    assert at.button(key="unlearn_run").disabled
    at.radio(key="model_choice").set_value("demo-known").run()
    assert at.selectbox(key="unlearn_spec").value == "demo"
    assert not at.exception, at.exception
