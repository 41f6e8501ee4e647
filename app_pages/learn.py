"""Learn: each registered method's formula and idea, and a live toy example of Min-K%++'s "is the true token a mode?"."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from mia_core import METHODS

st.title("Learn: how the methods decide")
st.caption("Every registered method, with its formula and the intuition behind it. Scores are oriented "
           "higher = more member-like.")
for spec in METHODS.values():
    with st.expander(f"{spec.label}  ·  `{spec.name}`", expanded=spec.name == "min_k_pp"):
        st.latex(spec.formula)
        st.write(spec.idea)
        st.caption(f"Needs: {', '.join(spec.access)} · cost: {spec.cost}")

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
fig = go.Figure(go.Bar(x=table["token"], y=probs, marker_pattern_shape=["/" if j == i else "" for j in range(len(probs))],
                       marker_color=["#b2182b" if j == i else "#9ecae1" for j in range(len(probs))]))
fig.update_layout(yaxis_title="p(v | prefix)", height=300, margin={"t": 20})
st.plotly_chart(fig, key="learn_bar")
c1, c2, c3 = st.columns(3)
c1.metric("Min-K% token score: log p", f"{logp[i]:.3f}")
c2.metric("μ (expected log p)", f"{mu:.3f}")
c3.metric("Min-K%++ token score: z", f"{z:.3f}")
st.caption("z > 0: the true token is more likely than the model's typical prediction — a mode-like, member-like token.")
st.page_link("app_pages/explore.py", label="Try the methods on a real text →", icon=":material/biotech:")
