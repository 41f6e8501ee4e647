"""Learn's live toys: made-up token statistics a learner edits, scored by the method's own registered code.

Every token-level method that needs nothing but the statistics, or besides them only a corpus frequency table, gets
one (`toy_methods`, read from the registry): an editable table of eight tokens (log p, entropy, top-1 log p, σ, and a
made-up corpus count where the method needs frequencies), the method's score with its defaults, and which tokens
entered it. The "is the true token a mode?" toy shows Min-K% and Min-K%++ on one made-up next-token distribution, both
through `mia_core.score`. Methods that run the model again or need helper texts have no toy: their token scores come
from passes a table cannot stand in for.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from mia_core import METHODS, FrequencyTable, TokenStats, score
from mia_core.api import methods_for, teaching_order
from mia_core.palette import MEMBER, NEUTRAL

#: Made-up statistics of eight tokens: a rare year the model was sure about, rare words it was unsure about.
TOY = pd.DataFrame({"token": ["The", " castle", " was", " built", " in", " 1287", " by", " monks"],
                    "log p": [-2.1, -6.5, -0.4, -1.2, -0.3, -7.8, -0.9, -5.2],
                    "entropy (nats)": [3.1, 4.0, 0.6, 1.4, 0.5, 1.2, 0.8, 3.5],
                    "top-1 log p": [-1.0, -1.9, -0.4, -0.6, -0.3, -0.9, -0.5, -1.5],
                    "σ": [1.6, 2.0, 0.8, 1.1, 0.7, 1.9, 0.9, 1.8]})
#: Made-up counts of the eight tokens in a reference corpus (each token its own id), for methods that need `freq`.
CORPUS_COUNTS = pd.DataFrame({"corpus count": [50_000, 200, 40_000, 800, 60_000, 5, 30_000, 50]})
#: Needs a toy can meet besides the statistics, with the columns it adds for them.
TOY_NEEDS = {"stats": None, "freq": CORPUS_COUNTS}
#: The mode toy's made-up next-token distribution (renormalised after edits).
DISTRIBUTION = pd.DataFrame({"token": ["the", "a", "his", "her", "this", "that", "my", "our", "one", "its"],
                             "probability": [0.2, 0.2, 0.15, 0.1, 0.1, 0.08, 0.07, 0.05, 0.03, 0.02]})


def toy_methods() -> list[str]:
    """Token-level methods whose needs a table of numbers meets (`TOY_NEEDS`), in teaching order."""
    runnable = set(methods_for(tuple(TOY_NEEDS), token_level=True))
    return [name for name in teaching_order() if name in runnable]


def toy_table(method: str) -> pd.DataFrame:
    """The toy's starting rows for a method: the token statistics, and a column for each further need it has."""
    extra = [TOY_NEEDS[need] for need in METHODS[method].needs if TOY_NEEDS.get(need) is not None]
    return pd.concat([TOY, *extra], axis=1)


def toy_inputs(method: str, table: pd.DataFrame) -> dict:
    """What the method needs besides the statistics, from the edited rows: a frequency table of the corpus counts
    (token i has id i; counts rounded to whole numbers ≥ 0)."""
    if "freq" not in METHODS[method].needs:
        return {}
    counts = np.clip(np.round(table["corpus count"].to_numpy(dtype=float)), 0, None).astype(np.int64)
    return {"freq": FrequencyTable(counts, "toy", "the toy's made-up corpus counts", 1)}


def toy_stats(table: pd.DataFrame) -> TokenStats:
    """`TokenStats` of the edited rows: μ = −entropy (E log p is minus the entropy), σ ≥ 1e-6, and the top-1 guess
    never less likely than the true token."""
    tokens = table["token"].astype(str).tolist()
    ends = np.cumsum([len(t) for t in tokens])
    logprob = table["log p"].to_numpy(dtype=float)
    top1 = np.maximum(table["top-1 log p"].to_numpy(dtype=float), logprob)
    entropy = np.clip(table["entropy (nats)"].to_numpy(dtype=float), 0, None)
    n = len(tokens)
    return TokenStats(text="".join(tokens), token_ids=np.arange(n), tokens=tokens,
                      offsets=np.stack([ends - [len(t) for t in tokens], ends], axis=1), logprob=logprob, mu=-entropy,
                      sigma=np.clip(table["σ"].to_numpy(dtype=float), 1e-6, None), top1_id=np.zeros(n, int),
                      top1_logprob=top1, entropy=entropy, rank=np.where(logprob >= top1, 1, 2))


def draw_toy(method: str) -> None:
    """The method's toy: the editable tokens, its score on them (its defaults), each token's score and selection."""
    spec = METHODS[method]
    st.markdown(f"**Try it:** edit the made-up tokens; {spec.label} scores them with its own code and its defaults"
                + (f" ({', '.join(f'{i.name} = {i.default}' for i in spec.param_infos)})" if spec.param_infos else "")
                + ".")
    start = toy_table(method)
    table = st.data_editor(start, num_rows="fixed", key=f"learn_toy_{method}", hide_index=True).fillna(start)
    try:
        result = score(method, toy_stats(table), **toy_inputs(method, table))
    except ValueError as err:  # e.g. Tag&Tab with every word edited away
        st.error(f"{spec.label}: {err}")
        return
    st.metric(f"{spec.label} on the toy", f"{result.value:.4f}")
    st.dataframe(pd.DataFrame({"token": table["token"].astype(str), "token score": result.token_scores,
                               "enters the score": result.selected}),
                 hide_index=True, key=f"learn_toy_result_{method}")


def one_token_stats(logp: float, mu: float, sigma: float) -> TokenStats:
    """Statistics of a single token: its log p and the mean and spread of log p under the prediction."""
    one = np.ones(1)
    return TokenStats(text="x", token_ids=np.zeros(1, int), tokens=["x"], offsets=np.array([[0, 1]]),
                      logprob=logp * one, mu=mu * one, sigma=sigma * one, top1_id=np.zeros(1, int),
                      top1_logprob=logp * one, entropy=-mu * one, rank=np.ones(1, int))


def draw_mode_toy() -> None:
    """Min-K% and Min-K%++ on one edited next-token distribution: the true token's log p, and its z against μ and σ."""
    st.subheader("Try it: is the true token a mode?")
    st.write("Edit the model's next-token probabilities (they are renormalised) and pick the true token. "
             "Min-K% only sees its probability; Min-K%++ compares it with the whole distribution.")
    table = st.data_editor(DISTRIBUTION, num_rows="fixed", key="learn_dist", hide_index=True)
    probs = np.clip(table["probability"].fillna(0).to_numpy(dtype=float), 1e-9, None)
    probs = probs / probs.sum()
    true_token = st.selectbox("True next token", table["token"], key="learn_true")
    i = int(np.flatnonzero(table["token"].to_numpy() == true_token)[0])
    logp = np.log(probs)
    mu = float(np.sum(probs * logp))
    sigma = float(np.sqrt(np.sum(probs * (logp - mu) ** 2)))
    token = one_token_stats(float(logp[i]), mu, sigma)
    fig = go.Figure(go.Bar(x=[html.escape(str(t)) for t in table["token"]], y=probs,  # plotly labels are HTML
                           marker_pattern_shape=["/" if j == i else "" for j in range(len(probs))],
                           marker_color=[MEMBER if j == i else NEUTRAL for j in range(len(probs))]))
    fig.update_layout(yaxis_title="p(v | prefix)", height=300, margin={"t": 20})
    st.plotly_chart(fig, key="learn_bar")
    c1, c2, c3 = st.columns(3)
    c1.metric("Min-K% token score: log p", f"{score('min_k', token).value:.3f}")
    c2.metric("μ (expected log p)", f"{mu:.3f}")
    c3.metric("Min-K%++ token score: z", f"{score('min_k_pp', token).value:.3f}")
    st.caption("z > 0: the true token is more likely than the model's typical prediction — a mode-like, member-like "
               "token. Both numbers come from the methods' own code, on this one token.")
