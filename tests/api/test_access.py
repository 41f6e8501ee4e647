"""Model access: what a model offers against what each method reads, and the sentence of every refusal."""
from __future__ import annotations

import pytest

from mia_core import METHODS, load_model
from mia_core.api import FULL_ACCESS, FULL_VOCABULARY, AccessNeeds, ModelAccess, methods_allowed, refusal
from tests.support.tiny import save_tiny_model

SERVER_20 = ModelAccess(top_k=20, further_passes=True, where="this server")


def test_the_in_process_model_allows_every_method(tiny_lm):
    assert tiny_lm.access == FULL_ACCESS
    allowed = methods_allowed(tiny_lm)
    assert allowed.allowed == list(METHODS) and allowed.refused == {}


def test_a_server_with_twenty_logprobs_refuses_what_needs_the_whole_distribution():
    allowed = methods_allowed(SERVER_20)
    full = {n for n, s in METHODS.items() if s.access.full_distribution}
    gradients = {n for n, s in METHODS.items() if s.access.gradients}
    generation = {n for n, s in METHODS.items() if s.access.generation}
    assert set(allowed.refused) == full | gradients | generation
    assert {"min_k_pp", "surp", "gap_k", "infilling"} <= full and {"grad_norm", "gds"} <= gradients
    assert set(allowed.allowed) == set(METHODS) - set(allowed.refused)
    assert allowed.refused["min_k_pp"] == ("Min-K%++ needs the mean and spread of the full next-token distribution; "
                                           "this server returns 20 log-probs per token.")
    assert allowed.refused["grad_norm"].endswith("; this server gives no gradients.")
    assert allowed.refused["samia"].endswith("; this server does not generate text.")
    assert list(allowed.allowed) == [n for n in METHODS if n in allowed.allowed]  # registry order


def test_only_the_true_tokens_logprob_allows_the_plain_methods_and_says_so():
    logprobs_only = ModelAccess(where="this endpoint")
    allowed = methods_allowed(logprobs_only, ["loss", "min_k", "zlib", "pac", "min_k_pp"])
    assert allowed.allowed == ["loss", "min_k", "zlib"]
    assert allowed.refused["pac"] == ("PAC needs further passes on word-swapped copies of the text; this endpoint "
                                      "scores only the texts it is given.")
    assert allowed.refused["min_k_pp"].endswith("this endpoint returns only the true token's log-prob.")


@pytest.mark.parametrize("offer, needed, refused", [
    (ModelAccess(top_k=20), AccessNeeds(top_k=40), True),
    (ModelAccess(top_k=40), AccessNeeds(top_k=40), False),
    (ModelAccess(full_distribution=True), AccessNeeds(top_k=40), False),  # the whole distribution holds any top-k
    (ModelAccess(top_k=FULL_VOCABULARY), AccessNeeds(full_distribution=True), True),  # log-probs, not μ and σ
    (ModelAccess(token_logprob=False, generation=True), AccessNeeds(generation=True, token_logprob=False), False),
    (ModelAccess(token_logprob=False), AccessNeeds(), True),
])
def test_each_kind_of_access_is_compared(offer, needed, refused):
    assert (refusal(offer, needed, "M") is not None) == refused


def test_refusals_name_what_is_missing_in_the_methods_own_words():
    sentence = refusal(ModelAccess(top_k=5, where="this server"), AccessNeeds(top_k=40), "Extraction")
    assert sentence == "Extraction needs the top 40 log-probs at each position; this server returns 5 log-probs per token."
    why = refusal(ModelAccess(), AccessNeeds(gradients=True, why="the gradient of the text's loss"), "G")
    assert why == "G needs the gradient of the text's loss; this model gives no gradients."


def test_every_method_declares_its_access_in_words():
    for spec in METHODS.values():
        words = spec.access_words()
        assert words and all(isinstance(w, str) and w for w in words)


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    return load_model(str(save_tiny_model(tmp_path_factory.mktemp("tiny"))), device="cpu")
