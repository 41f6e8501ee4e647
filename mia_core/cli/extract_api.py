"""`mia extract` on a chat API (METHODS-API.md §18): each window's prefix sent, its samples and greedy repeats recorded,
`p̂` with its Clopper–Pearson interval per window — never mixed with the white-box `p_z` of a model in process.

Windows are counted in words (38 words ≈ 50 tokens: the `--prefix`, `--suffix` and `--stride` token counts are
turned into words by that rule), since no production API's tokenizer is at hand.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..audit.api_extraction import Text
from ..blackbox.gl_bound import declared_tokenizer
from ..blackbox.window_sampling import WindowSettings
from ..csv_safe import to_csv_safe
from ..model.chat.chat_model import connect_chat
from ..model.chat.prices import Budget, parse_budget
from ..runs.api_results import stored_results
from ..runs.store import ResultsStore
from .api_runs import closing_lines, run_api
from .app import fail
from .terminal import echo, one_line

#: Words per token of the rule that turns the token counts of `mia extract` into words (Ahmed et al. §3.2).
WORDS_PER_TOKEN = 38 / 50


def words_for(tokens: int) -> int:
    """`tokens` as words by the 38-per-50 rule (at least 1)."""
    return max(1, round(tokens * WORDS_PER_TOKEN))


def extract_api(model: str, data: pd.DataFrame, output: Path, summary: Path | None, *, prefix: int, suffix: int,
                stride: int, samples: int, per_request: int, greedy_repeats: int, budget: str | None,
                store: Path | None, run_id: str | None, tokenizer: Path | None = None) -> None:
    """Sample every window of every text from the chat API `model`; write one row per window (and per text)."""
    try:
        path, sha256 = declared_tokenizer(tokenizer)
        settings = WindowSettings(words_for(prefix), words_for(suffix), words_for(stride), samples, per_request,
                                  greedy_repeats, tokenizer=path, tokenizer_sha256=sha256)
        limit = parse_budget(budget) if budget else Budget()
    except ValueError as err:
        fail(str(err))
    chat = connect_chat(model)
    if path is not None and chat.tier.name != "GL":
        fail(f"{chat.name} returns no log-probs (tier G): --tokenizer gives a bound only with them")
    echo(f"model: {chat.name} (answered as {chat.answered_model}; tier {chat.tier.name}); {chat.prices.words()}")
    echo(f"windows: {settings.prefix_words} + {settings.suffix_words} words every {settings.stride_words} words; "
         f"{settings.samples} samples at temperature {settings.temperature:g} and {settings.greedy_repeats} greedy "
         "calls per window")
    texts = [Text(str(i), str(t), "text") for i, t in zip(data["id"], data["text"])]
    results_store = ResultsStore(store)
    outcome = run_api(chat, results_store, texts, settings, budget=limit, run_id=run_id)
    results = stored_results(results_store, outcome.run_id)
    units = outcome.results["unit"].tolist()
    windows = [pd.DataFrame(results[u]["windows"]).assign(id=i) for u, i in zip(units, data["id"]) if u in results]
    table = pd.concat(windows, ignore_index=True) if windows else pd.DataFrame()
    if not table.empty:
        table = table[["id"] + [c for c in table.columns if c != "id"]]
    to_csv_safe(table, output)
    per_text = outcome.results.drop(columns=["unit", "role"], errors="ignore")
    if summary is not None:
        to_csv_safe(per_text, summary)
    for row in per_text.to_dict("records"):
        if isinstance(row.get("max_p_hat"), float) and not math.isnan(row["max_p_hat"]):
            echo(one_line(f"{row['name']}: {row['n_windows']} windows; largest p̂ {row['max_p_hat']:.3f} (upper bound "
                          f"{row['max_p_hi']:.3f}); extracted at least once in {row['share_extracted']:.1%} of windows"
                          f", greedily in {row['share_greedy']:.1%}"))
        if isinstance(row.get("share_gl_ruled_out"), float) and not math.isnan(row["share_gl_ruled_out"]):
            echo(one_line(f"{row['name']}: the log-prob bound rules out {row['share_gl_ruled_out']:.1%} of windows "
                          f"at p = 0.5; {int(row['gl_exact_paths'])} window(s) came back token for token"))
    closing_lines(outcome, store)
    echo(f"wrote {len(table):,} windows (p̂ of the chat API, not the white-box p_z) to {output}")
