"""`ExtractionResult`: one text's windows with their extraction probabilities, and what they add up to.

Per window: where it lies (tokens and characters), log10 p_z under top-k sampling, the greedy flag and greedy
probability under the windows' greedy rule (`greedy_columns`), and n needed for p = 0.5 and 0.95 ((n,p)-discoverability: 1 − (1 − p_z)^n ≥ p). Per character: the highest p_z of the windows whose
suffix covers it, as the paper's figures. Passages: the characters covered by the suffixes of windows at or above a
threshold, merged where they touch or overlap.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .settings import ExtractionSettings

#: The p_z thresholds whose shares of windows are reported (Cooper et al.'s later versions), and the headline one.
THRESHOLDS = (1e-3, 1e-2, 0.1, 0.5)
EXTRACTABLE = 0.5
#: The probabilities p of (n,p)-discoverability reported per window.
P_TARGETS = (0.5, 0.95)
#: Where a window lies: its first token, its first character, its suffix's first character, its last character + 1.
SPAN_COLUMNS = ("token_start", "char_start", "suffix_char_start", "char_end")
WINDOW_COLUMNS = ("window", "token_start", "char_start", "suffix_char_start", "char_end", "prefix_tokens",
                  "suffix_tokens", "log10_pz", "pz", "greedy", "log10_pz_greedy", "n_for_p50", "n_for_p95")


def n_needed(log10_pz: np.ndarray, p: float) -> np.ndarray:
    """Draws needed so that the suffix comes out at least once with probability p: ceil(log(1−p) / log(1−p_z)) (∞ where
    p_z = 0, 1 where p_z = 1); log1p keeps tiny p_z exact."""
    pz = np.power(10.0, np.asarray(log10_pz, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.ceil(math.log1p(-p) / np.log1p(-pz))
    n = np.where(pz >= 1.0, 1.0, n)
    return np.where(pz <= 0.0, np.inf, np.maximum(n, 1.0))


@dataclass(frozen=True)
class Passage:
    """Characters [start, end) of the text covered by extractable suffixes, and the lowest log10 p_z among the windows
    that make it up (every one of them is at least that likely)."""

    start: int
    end: int
    min_log10_pz: float
    windows: int

    @property
    def chars(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class ExtractionResult:
    """One text's extraction windows (`windows`, columns `WINDOW_COLUMNS`) under `settings`."""

    text: str
    settings: ExtractionSettings
    windows: pd.DataFrame
    n_text_tokens: int

    @property
    def n_windows(self) -> int:
        return len(self.windows)

    def char_max_log10_pz(self) -> np.ndarray:
        """(len(text),) float64: the highest log10 p_z over the windows whose suffix covers each character (−inf: none)."""
        out = np.full(len(self.text), -np.inf)
        w = self.windows
        for a, b, v in zip(w["suffix_char_start"].to_numpy(), w["char_end"].to_numpy(), w["log10_pz"].to_numpy()):
            np.maximum(out[a:b], v, out=out[a:b])
        return out

    def share_at(self, threshold: float) -> float:
        """The share of windows with p_z ≥ threshold (nan without windows)."""
        if not self.n_windows:
            return float("nan")
        return float((self.windows["log10_pz"] >= math.log10(threshold)).mean())

    def greedy_share(self) -> float:
        """The share of windows whose suffix greedy decoding reproduces (nan without windows)."""
        return float(self.windows["greedy"].mean()) if self.n_windows else float("nan")

    def passages(self, threshold: float = EXTRACTABLE, *, greedy: bool = False) -> list[Passage]:
        """Merged character spans of the suffixes of windows with p_z ≥ threshold (or, greedy=True, of the greedily
        extractable windows), in text order."""
        w = self.windows
        keep = w["greedy"].to_numpy() if greedy else w["log10_pz"].to_numpy() >= math.log10(threshold)
        rows = w[keep].sort_values("suffix_char_start")
        out: list[Passage] = []
        for a, b, v in zip(rows["suffix_char_start"].tolist(), rows["char_end"].tolist(), rows["log10_pz"].tolist()):
            if out and a <= out[-1].end:
                last = out[-1]
                out[-1] = Passage(last.start, max(last.end, b), min(last.min_log10_pz, v), last.windows + 1)
            else:
                out.append(Passage(a, b, v, 1))
        return out

    def longest_passage(self, threshold: float = EXTRACTABLE, *, greedy: bool = False) -> Passage | None:
        """The longest passage (`passages`), or None."""
        found = self.passages(threshold, greedy=greedy)
        return max(found, key=lambda p: p.chars) if found else None

    def summary(self) -> dict:
        """Windows tested, the share at each threshold and the greedy share, and extractable passages at p_z ≥ 0.5."""
        found = self.passages()
        out = {"text_tokens": self.n_text_tokens, "windows": self.n_windows}
        out.update({f"share_pz_ge_{t:g}": self.share_at(t) for t in THRESHOLDS})
        out["share_greedy"] = self.greedy_share()
        out["max_log10_pz"] = float(self.windows["log10_pz"].max()) if self.n_windows else float("nan")
        out["passages"] = len(found)
        out["passage_chars"] = sum(p.chars for p in found)
        return out


def greedy_columns(windows: str, top: np.ndarray, log10_tied: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(greedy flag, log10 greedy probability) per window under the greedy rule of the `windows` scheme.

    "ours": greedy decoding reproduces the suffix when every suffix token is at the top, a tie there included
    (probability 1, else 0). "reference" (Cooper et al.'s k = 1): m tokens tied at the top each get 1/m, so the
    probability is ∏ 1/m (`log10_tied`), and the flag holds only where it is 1 (the top unique at every position).
    """
    top = np.asarray(top, bool)
    if windows == "ours":
        return top, np.where(top, 0.0, -np.inf)
    tied = np.asarray(log10_tied, np.float64)
    return tied == 0.0, tied


def window_table(spans: dict[str, np.ndarray], settings: ExtractionSettings, log10_pz: np.ndarray,
                 greedy: np.ndarray, *, log10_pz_greedy: np.ndarray | None = None,
                 prefix_tokens: int | None = None) -> pd.DataFrame:
    """The per-window table of a text from its windows' places (`SPAN_COLUMNS`) and the pass's results.

    log10_pz_greedy : the greedy probability (`greedy_columns`; default 1 where `greedy`, else 0).
    prefix_tokens : text tokens of each prefix (default `settings.prefix`; P − 1 after a reference window's BOS).
    """
    n = len(log10_pz)
    greedy = np.asarray(greedy).astype(bool)
    table = {
        "window": np.arange(n, dtype=np.int64),
        **{name: np.asarray(spans[name], np.int64) for name in SPAN_COLUMNS},
        "prefix_tokens": np.full(n, settings.prefix if prefix_tokens is None else prefix_tokens, np.int64),
        "suffix_tokens": np.full(n, settings.suffix, np.int64),
        "log10_pz": np.asarray(log10_pz, np.float64),
        "pz": np.power(10.0, log10_pz),
        "greedy": greedy,
        "log10_pz_greedy": np.where(greedy, 0.0, -np.inf) if log10_pz_greedy is None else
        np.asarray(log10_pz_greedy, np.float64),
        "n_for_p50": n_needed(log10_pz, P_TARGETS[0]),
        "n_for_p95": n_needed(log10_pz, P_TARGETS[1]),
    }
    return pd.DataFrame(table, columns=list(WINDOW_COLUMNS))
