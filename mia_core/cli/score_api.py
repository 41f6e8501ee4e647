"""`mia score` on a chat API (METHODS-API.md §20): SimMIA* — and SimMIA, with the recorded all-MiniLM-L6-v2 weights —
by sampling next words through the API, every call in the run's evidence record (`mia verify` recomputes the
scores). The other methods need log-probs of a given text, which a chat API does not give.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..audit.api_extraction import Text
from ..blackbox.simmia import MINILM, embedder
from ..blackbox.simmia_sampling import SimMiaSettings
from ..csv_safe import to_csv_safe
from ..inputs.text_parts import TextParts
from ..model.chat.chat_model import connect_chat
from ..runs.api_results import stored_results
from ..runs.store import ResultsStore
from .api_runs import closing_lines, run_api
from .app import fail
from .terminal import echo

#: The methods a chat API can run through `mia score`.
API_METHODS = ("simmia_star", "simmia")


def score_api(model: str, data: TextParts, names: list[str], helpers: dict, params: dict, output: Path) -> None:
    """Score every text with SimMIA* (and SimMIA when asked) through the chat API `model`; one row per text."""
    other = [n for n in names if n not in API_METHODS]
    if other:
        fail(f"a chat API gives no log-probs of a given text: {', '.join(other)} cannot run on it; of the methods, "
             f"{' and '.join(API_METHODS)} do (or audit books with mia extract-books, mia decop-books)")
    shots = helpers["shots_nonmembers"]
    chosen = params  # --param NAME=VALUE, flat
    try:
        found = embedder(chosen.get("embedding", MINILM)) if "simmia" in names else None
        settings = SimMiaSettings(nonmembers=shots.texts[:chosen.get("n_shots", 7)], nonmember_source=shots.source,
                                  samples=chosen.get("n_samples", 10), mode=chosen.get("mode", "ours"),
                                  embedding=None if found is None else chosen.get("embedding", MINILM),
                                  embedding_sha256=None if found is None else found.sha256)
    except ValueError as err:
        fail(str(err))
    frame = data.whole()
    chat = connect_chat(model)
    echo(f"model: {chat.name} (answered as {chat.answered_model}); {chat.prices.words()}", err=True)
    texts = [Text(str(i), str(t), "text") for i, t in zip(frame["id"], frame["text"])]
    store = ResultsStore()
    outcome = run_api(chat, store, texts, settings, err=True)
    results = stored_results(store, outcome.run_id)
    rows = []
    for unit, text_id in zip(outcome.results["unit"], frame["id"]):
        result = results.get(unit, {})
        row = {"id": text_id, "simmia_star": result.get("simmia_star_score")}
        if "simmia" in names:
            row["simmia"] = result.get("simmia_score")
        rows.append(row)
    to_csv_safe(pd.DataFrame(rows), output)
    echo(f"wrote {len(rows)} rows ({settings.variant}, {settings.samples} samples per word) to {output}", err=True)
    closing_lines(outcome, None, err=True)
