"""Learn: each registered method's formula and idea, a live toy example of Min-K%++'s "is the true token a mode?",
and SURP and Gap-K% run on made-up token statistics."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from mia_core import METHODS, TokenStats, score
from mia_core.methods import NEEDS
from mia_core.palette import MEMBER, NEUTRAL

#: Made-up statistics of eight tokens: a rare year the model was sure about, rare words it was unsure about.
TOY = pd.DataFrame({"token": ["The", " castle", " was", " built", " in", " 1287", " by", " monks"],
                    "log p": [-2.1, -6.5, -0.4, -1.2, -0.3, -7.8, -0.9, -5.2],
                    "entropy (nats)": [3.1, 4.0, 0.6, 1.4, 0.5, 1.2, 0.8, 3.5],
                    "top-1 log p": [-1.0, -1.9, -0.4, -0.6, -0.3, -0.9, -0.5, -1.5],
                    "σ": [1.6, 2.0, 0.8, 1.1, 0.7, 1.9, 0.9, 1.8]})


def toy_stats(table: pd.DataFrame) -> TokenStats:
    """`TokenStats` of the edited rows (the top-1 guess is never less likely than the true token)."""
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

st.title("Learn: how the methods decide")
st.caption("Every registered method, with its formula and the intuition behind it. Scores are oriented "
           "higher = more member-like.")
for spec in METHODS.values():
    with st.expander(f"{spec.label}  ·  `{spec.name}`", expanded=spec.name == "min_k_pp"):
        st.latex(spec.formula)
        st.write(spec.idea)
        st.markdown("**Needs:** " + "; ".join(NEEDS[need].split(" (`")[0] for need in spec.needs) + ".")
        st.caption(f"Access to the model: {', '.join(spec.access_words())} · cost: {spec.cost}")

st.subheader("Try it: is the true token a mode?")
st.write("Edit the model's next-token probabilities (they are renormalised) and pick the true token. "
         "Min-K% only sees its probability; Min-K%++ compares it with the whole distribution.")
default = pd.DataFrame({"token": ["the", "a", "his", "her", "this", "that", "my", "our", "one", "its"],
                        "probability": [0.2, 0.2, 0.15, 0.1, 0.1, 0.08, 0.07, 0.05, 0.03, 0.02]})
table = st.data_editor(default, num_rows="fixed", key="learn_dist", hide_index=True)
probs = np.clip(table["probability"].to_numpy(dtype=float), 1e-9, None)
probs = probs / probs.sum()
true_token = st.selectbox("True next token", table["token"], key="learn_true")
i = int(np.flatnonzero(table["token"].to_numpy() == true_token)[0])
logp = np.log(probs)
mu = float(np.sum(probs * logp))
sigma = float(np.sqrt(np.sum(probs * (logp - mu) ** 2)))
z = (logp[i] - mu) / max(sigma, 1e-12)
fig = go.Figure(go.Bar(x=[html.escape(str(t)) for t in table["token"]], y=probs,  # plotly labels are HTML
                       marker_pattern_shape=["/" if j == i else "" for j in range(len(probs))],
                       marker_color=[MEMBER if j == i else NEUTRAL for j in range(len(probs))]))
fig.update_layout(yaxis_title="p(v | prefix)", height=300, margin={"t": 20})
st.plotly_chart(fig, key="learn_bar")
c1, c2, c3 = st.columns(3)
c1.metric("Min-K% token score: log p", f"{logp[i]:.3f}")
c2.metric("μ (expected log p)", f"{mu:.3f}")
c3.metric("Min-K%++ token score: z", f"{z:.3f}")
st.caption("z > 0: the true token is more likely than the model's typical prediction — a mode-like, member-like token.")

st.subheader("Try it: SURP and Gap-K% on made-up tokens")
st.write("Edit the statistics of eight tokens. SURP keeps the least likely tokens the model was *sure* about (low "
         "entropy): confident and wrong. Gap-K% measures how far each true token sits below the model's top guess, "
         "in σ, and averages the worst stretches of w tokens. Both run here through the registry, with their defaults.")
toy = st.data_editor(TOY, num_rows="fixed", key="learn_toy", hide_index=True).fillna(TOY)  # a cleared cell: its default
stats = toy_stats(toy)
surp, gap = score("surp", stats), score("gap_k", stats)
st.dataframe(pd.DataFrame({"token": stats.tokens, "surprising (SURP)": surp.selected, "gap g (Gap-K%)": gap.token_scores,
                           "in a chosen window": gap.selected}), hide_index=True, key="learn_toy_result")
c1, c2 = st.columns(2)
c1.metric("SURP score: mean log p of the surprising tokens", f"{surp.value:.3f}")
c2.metric("Gap-K% score: mean gap of the worst window", f"{gap.value:.3f}")
st.caption(f"SURP: candidates are the {METHODS['surp'].params().k:.0%} least likely tokens, surprising when the "
           f"entropy is below {METHODS['surp'].params().e_max:g} nats. Gap-K%: windows of "
           f"{METHODS['gap_k'].params().w} tokens, the lowest {METHODS['gap_k'].params().k:.0%} of them averaged. "
           "Higher = more member-like for both.")
st.page_link("app_pages/explore.py", label="Try the methods on a real text →", icon=":material/biotech:")
