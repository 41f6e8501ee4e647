"""Learn: every registered method in teaching order (docs/methods.md, "Teaching order"), each with its formula and
idea, its paper, when it fails, and — for the token-level methods a table of numbers can run — a live toy
(`ui.learn_toys`); then "is the true token a mode?" for Min-K% against Min-K%++."""
from __future__ import annotations

import streamlit as st

from mia_core import METHODS
from mia_core.api import LESSON_STAGES, teaching_order
from mia_core.methods import NEEDS
from ui.learn_toys import draw_mode_toy, draw_toy, toy_methods
from ui.places import EXPLORE
from ui.markdown import md

#: Methods whose entry is open when the page loads: the first two a learner meets.
OPEN_FIRST = 2


def paper_line(name: str) -> str:
    """The method's paper as markdown: authors, year, title and venue, then its link as a plain clickable address
    (nothing where it has none)."""
    paper = METHODS[name].paper
    link = f" [{paper.link}]({paper.link})" if paper.link else ""
    return f"**Paper:** {md(paper.cite())}{link}"


st.title("Learn: how the methods decide")
order = teaching_order()
toys = toy_methods()
st.caption("Every registered method, in the order they are best learnt: "
           + " → ".join(f"{n + 1}. {stage}" for n, stage in enumerate(LESSON_STAGES.values()))
           + f". Scores are oriented higher = more member-like. The {len(toys)} token-level methods that a table of "
             "numbers can run (token statistics, and corpus counts where a method needs frequencies) have a live toy: "
             "edit its made-up tokens and the method's own code rescores them.")
for n, name in enumerate(order):
    spec = METHODS[name]
    with st.expander(f"{n + 1}. {spec.label}  ·  `{name}`", expanded=n < OPEN_FIRST):
        st.caption(f"Stage: {spec.stage}")
        st.latex(spec.formula)
        st.write(spec.idea)
        st.markdown(paper_line(name))
        st.markdown(f"**When it fails:** {md(spec.fails)}")
        st.markdown("**Needs:** " + "; ".join(NEEDS[need].split(" (`")[0] for need in spec.needs) + ".")
        st.caption(f"Access to the model: {', '.join(spec.access_words())} · cost: {spec.cost}")
        if name in toys:
            draw_toy(name)
        elif spec.token_level:
            where = "try it on a real text on Explore" if EXPLORE.offers(spec) else \
                "run it on real texts with `mia score` (Explore does not take what it needs)"
            st.caption("No toy: its token scores come from further model passes, another model or helper texts, "
                       f"which made-up numbers cannot stand in for; {where}.")
draw_mode_toy()
st.page_link("app_pages/explore.py", label="Try the methods on a real text →", icon=":material/biotech:")
