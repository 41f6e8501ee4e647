"""`TokenStrings`: display strings made on first read, equal to the list the statistics pass used to build, and
stored as the names of the tokens without a span only."""
from __future__ import annotations

import numpy as np
import pandas as pd

from mia_core.api.token_stats import TokenStrings, stats_from_parts, stats_parts, token_names


def test_token_strings_read_as_the_eager_list(llama_lm):
    text = "The cat sat on the mat.\nA second line & more."
    stats = llama_lm.token_stats([text], cache=False)[0]
    assert isinstance(stats.tokens, TokenStrings) and stats.tokens._strings is None  # nothing made by the pass
    ids = stats.token_ids.tolist()
    eager = [text[a:b] if b > a else llama_lm.tokenizer.convert_ids_to_tokens(t)
             for t, (a, b) in zip(ids, stats.offsets.tolist())]
    assert stats.tokens == eager and eager == stats.tokens and list(stats.tokens) == eager
    assert stats.tokens[0] == "T" and stats.tokens[1:4] == eager[1:4] and len(stats.tokens) == len(eager)
    assert repr(stats.tokens) == repr(eager) and stats.tokens != eager[:-1]
    assert pd.DataFrame({"token": stats.tokens})["token"].tolist() == eager
    assert token_names(text, stats.offsets, eager) == {}  # every scored token has its span (the boundary is not scored)


def test_stored_parts_keep_only_the_names_and_give_the_same_strings():
    text = "ab cd"
    offsets = np.array([[0, 0], [0, 2], [2, 5]])
    given = ["<s>", "ab", "!!"]  # a list made by hand: the last string is not the text's span
    arrays = {"token_ids": np.arange(3), "offsets": offsets, "top1_id": np.zeros(3, np.int64),
              "rank": np.ones(3, np.int64), **{f: np.zeros(3, np.float32) for f in
                                              ("logprob", "mu", "sigma", "top1_logprob", "entropy")}}
    stats = stats_from_parts(text, arrays, {"bos_policy": "auto", "first_token_scored": True, "boundary_token": "<s>",
                                            "long_text": "none", "n_text_tokens": 2, "vocab_width": 9,
                                            "token_names": [[0, "<s>"], [2, "!!"]]})
    assert stats.tokens == given
    _, meta = stats_parts(stats)
    assert "tokens" not in meta and meta["token_names"] == [[0, "<s>"], [2, "!!"]]
