"""Short plain-language readings of sequence scores (what a number means, and what it does not)."""
from __future__ import annotations

import math

from scipy.special import expit

_READINGS = {
    "loss": lambda v: f"the model's average log-probability per token is {v:.2f} (perplexity {math.exp(-v):.1f}).",
    "zlib": lambda v: f"log-probability per token divided by the compressed size: {v:.5f}; it discounts texts that "
                      "are simply repetitive or predictable.",
    "min_k": lambda v: f"the k% least likely tokens average a log-probability of {v:.2f}: members tend to have fewer "
                       "very surprising tokens.",
    "min_k_pp": lambda v: f"the k% least expected tokens sit {abs(v):.2f} standard deviations "
                          f"{'below' if v < 0 else 'above'} what the model expected on average; memorised text "
                          "tends to score near zero or above.",
    "dc_pdd": lambda v: f"probability-weighted corpus rarity over first occurrences: {v:.4f}.",
    "lowercase": lambda v: f"lowercasing makes the text {v:.2f}× as hard for the model; members lose more.",
    "ref": lambda v: f"the target model finds the text {v:.2f} nats per token more likely than the reference model.",
    "infilling": lambda v: f"the k% least supported tokens average {v:.2f}: each compares the true token with the "
                           "model's top guess, counting how much likelier the true token makes the next few tokens; "
                           "members' tokens are better supported by what follows.",
    "neighbor": lambda v: f"the text is {abs(v):.2f} nats per token {'more' if v >= 0 else 'less'} likely than texts a "
                          "few words away; a memorised text stands out from its neighbours.",
    "gds": lambda v: f"a classifier trained on labelled examples reads this text's LoRA gradients as member with "
                     f"probability {expit(v):.0%} (log-odds {v:.2f}); it is "
                     "only as good as the labelled split it learned from.",
}


def reading(method: str, value: float) -> str:
    """One sentence on a score, ending with the caveat that matters: compare, don't conclude."""
    base = _READINGS.get(method, lambda v: f"score {v:.4f}.")(value)
    return f"{base[0].upper()}{base[1:]} Higher = more member-like; on its own a score is not evidence — " \
           "compare it with texts of known membership."
