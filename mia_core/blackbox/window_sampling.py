"""Black-box (n,p)-discoverable extraction per window (METHODS-API.md §18): for each window of a text, the API is given
the prefix and sampled `samples` times; `p̂` is the share of samples that start with the suffix exactly, with its
Clopper–Pearson interval and `n_needed`, beside `greedy_repeats` calls at temperature 0 (never a determinism claim).

The estimand is P(the API emits the suffix | this prompt), for the whole served system (hidden system prompt, filters,
the provider's sampling): it is **not** the white-box `p_z` of `mia extract` on a model in process, and the two are
never compared. Like the two-phase loop, this is a pure function of `send(step, body)`, so the evidence record
replays it (`mia verify`).

Windows are counted in words: no production API's tokenizer is at hand, and 38 words ≈ 50 tokens (Ahmed et al. §3.2);
the windows' word counts are recorded with the run. With a tokenizer declared to be the provider's, a tier GL API
also gives each window an upper bound on log p(z) from one greedy call (`gl_bound`).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Callable

from ..model.chat.answers import ChatAnswer
from .responses import classify
from .gl_bound import spells_ids, token_strings, window_bound
from .sampled import DEFAULT_PS, WindowEstimate, contained_match, estimate_window, greedy_summary, strict_match
from .two_phase import INSTRUCTION, SEPARATOR

#: Most windows one text is cut into (each costs `samples` + `greedy_repeats` answers): state it, bound it.
MAX_WINDOWS = 2_000
_WORD = re.compile(r"\S+")

Send = Callable[[int, dict], "ChatAnswer | None"]


@dataclass(frozen=True)
class WindowSettings:
    """Everything that decides the requests of a window run (stored in the run's manifest)."""

    prefix_words: int = 38
    suffix_words: int = 38
    stride_words: int = 38
    samples: int = 100
    """`n_s`: samples per window at `temperature` (ours: 100)."""
    per_request: int = 1
    """Choices asked per request (`n`), where the API offers it; 1 sends one request per sample."""
    greedy_repeats: int = 3
    """`r`: calls at temperature 0 per window (ours: 3), each stored; never a determinism claim."""
    temperature: float = 1.0
    top_p: float = 1.0
    alpha: float = 0.05
    tries: int = 100
    """`n` of (n,p): the adversary's tries a window is judged at."""
    tokenizer: str | None = None
    """Tier GL: a local tokenizer.json declared to be the provider's; with it, one more greedy call per window asks
    the top log-probs and bounds log p(z) (`gl_bound`). None: no bound."""
    tokenizer_sha256: str | None = None
    top_logprobs: int = 20

    def __post_init__(self) -> None:
        for name in ("prefix_words", "suffix_words", "stride_words", "samples", "per_request", "tries"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1 (got {getattr(self, name)})")
        if self.greedy_repeats < 0 or not 0 < self.alpha < 1:
            raise ValueError("greedy_repeats must be ≥ 0 and alpha in (0, 1)")
        if (self.tokenizer is None) != (self.tokenizer_sha256 is None) or not 1 <= self.top_logprobs <= 20:
            raise ValueError("a tokenizer needs its SHA-256 (and top_logprobs is 1–20)")

    @property
    def max_tokens(self) -> int:
        """Answer length asked: twice the suffix's words, plus 16 (a word is 1.3–1.5 tokens of English; ours)."""
        return 2 * self.suffix_words + 16


@dataclass(frozen=True)
class Window:
    """One window: where it is in the text (characters), its prefix and its suffix."""

    start: int
    end: int
    prefix: str
    suffix: str
    gap: str = " "
    """The text between prefix and suffix (what a completions endpoint writes before the suffix)."""


def word_windows(text: str, settings: WindowSettings) -> list[Window]:
    """The text's windows: `prefix_words` + `suffix_words` words, starting every `stride_words` words."""
    spans = [m.span() for m in _WORD.finditer(text)]
    width = settings.prefix_words + settings.suffix_words
    out = []
    for first in range(0, len(spans) - width + 1, settings.stride_words):
        middle = first + settings.prefix_words
        last = first + width - 1
        out.append(Window(spans[first][0], spans[last][1], text[spans[first][0]:spans[middle - 1][1]],
                          text[spans[middle][0]:spans[last][1]], text[spans[middle - 1][1]:spans[middle][0]]))
    if len(out) > MAX_WINDOWS:
        raise ValueError(f"{len(out):,} windows is over the {MAX_WINDOWS:,} one text may have: raise the stride, or "
                         "cut the text")
    return out


def window_body(model: str, api: str, window: Window, settings: WindowSettings, *, greedy: bool, seed: int) -> dict:
    """One request for a window: the §17 instruction and the prefix (a chat API) or the prefix alone (completions)."""
    body: dict = {"model": model}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": INSTRUCTION + SEPARATOR + window.prefix}]
    else:
        body["prompt"] = window.prefix
    body.update(max_tokens=settings.max_tokens, temperature=0 if greedy else settings.temperature, seed=seed)
    if not greedy:
        body.update(top_p=settings.top_p, n=settings.per_request)
    return body


def bound_body(model: str, api: str, window: Window, settings: WindowSettings, seed: int) -> dict:
    """The GL call of a window: greedy, with the generated tokens' top log-probs."""
    body = window_body(model, api, window, settings, greedy=True, seed=seed)
    if api == "chat":
        body.update(logprobs=True, top_logprobs=settings.top_logprobs)
    else:
        body["logprobs"] = settings.top_logprobs
    return body


def bound_target(api: str, window: Window, answer: "ChatAnswer | None") -> str:
    """The string whose token path is bounded: the gap and the suffix where the answer opens with whitespace, as a
    completion continuing the prefix does, else the suffix alone, as a chat answer starting afresh does (ours: the
    bound holds for whichever path it is computed for; it bounds that path, not every spelling of the suffix)."""
    choice = answer.choices[0] if answer is not None and answer.choices else None
    first = (choice.text or "") if choice is not None else ""
    return window.gap + window.suffix if api == "completions" or first[:1].isspace() else window.suffix


def _seed(text: str, window: int, call: int) -> int:
    """A request's seed: fixed by the text, the window and the call (so a resumed run sends the same bytes)."""
    return int.from_bytes(hashlib.sha256(f"{window}|{call}|{text}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def sample_text(text: str, model: str, api: str, settings: WindowSettings, send: Send,
                wait: Callable[[float], None] = lambda s: None) -> dict:
    """Every window's greedy calls and samples through `send`, and the per-window and per-text numbers."""
    windows = word_windows(text, settings)
    calls = settings.greedy_repeats + -(-settings.samples // settings.per_request) + (settings.tokenizer is not None)
    sampled = calls - (settings.tokenizer is not None)
    rows = []
    for w, window in enumerate(windows):
        greedy, samples, refusals, answers = [], [], 0, 0
        for call in range(sampled):
            is_greedy = call < settings.greedy_repeats
            answer = send(w * calls + call, window_body(model, api, window, settings, greedy=is_greedy,
                                                       seed=_seed(text, w, call)))
            for choice in (answer.choices if answer is not None else ()):
                answers += 1
                refusals += classify(choice.text, choice.finish_reason).kind == "refusal"
                hit = strict_match(choice.text or "", window.suffix)
                (greedy if is_greedy else samples).append((hit, contained_match(choice.text or "", window.suffix)))
        estimate = estimate_window([h for h, _ in samples[:settings.samples]] or [False], alpha=settings.alpha,
                                   n=settings.tries) if samples else None
        row = _row(w, window, estimate, greedy, samples, refusals, answers)
        if settings.tokenizer is not None:
            answer = send(w * calls + sampled, bound_body(model, api, window, settings, _seed(text, w, sampled)))
            target = bound_target(api, window, answer)
            choice = answer.choices[0] if answer is not None and answer.choices else None
            suffix = token_strings(settings.tokenizer, settings.tokenizer_sha256, target, as_ids=spells_ids(choice))
            row.update(window_bound(choice, suffix, settings.tries, DEFAULT_PS), gl_tokens=len(suffix),
                       gl_with_gap=target != window.suffix)
        rows.append(row)
    return {"windows": rows, **_per_text(rows)}


def _row(w: int, window: Window, estimate: WindowEstimate | None, greedy: list, samples: list, refusals: int,
         answers: int) -> dict:
    summary = greedy_summary([h for h, _ in greedy]) if greedy else None
    return {"window": w, "char_start": window.start, "char_end": window.end, "samples": len(samples),
            "strict": sum(h for h, _ in samples), "contained": sum(c for _, c in samples),
            "p_hat": estimate.p_hat if estimate else None, "p_lo": estimate.p_lo if estimate else None,
            "p_hi": estimate.p_hi if estimate else None,
            "n_needed_hat": list(estimate.n_needed_hat) if estimate else None,
            "discoverable": list(estimate.discoverable) if estimate else None,
            "greedy_strict": summary.k_greedy if summary else None, "greedy_calls": summary.r if summary else 0,
            "refusals": refusals, "answers": answers}


def _per_text(rows: list[dict]) -> dict:
    """§18 "Per text": the largest p̂ and p_hi, the share of windows extracted at least once, greedily, refusals."""
    estimated = [r for r in rows if r["p_hat"] is not None]
    greedy = [r for r in rows if r["greedy_calls"]]
    answers = sum(r["answers"] for r in rows)
    return {"n_windows": len(rows), "max_p_hat": max((r["p_hat"] for r in estimated), default=None),
            "max_p_hi": max((r["p_hi"] for r in estimated), default=None),
            "share_extracted": sum(r["strict"] > 0 for r in estimated) / len(estimated) if estimated else None,
            "share_greedy": sum(r["greedy_strict"] > 0 for r in greedy) / len(greedy) if greedy else None,
            "refusal_rate": sum(r["refusals"] for r in rows) / answers if answers else None,
            **_gl_per_text(rows)}


def _gl_per_text(rows: list[dict]) -> dict:
    """With a GL bound: the largest upper bound on a window's p(z), and the share of windows it rules out at p = 0.5
    (no adversary's n tries reach the suffix with even odds)."""
    bounded = [r for r in rows if r.get("gl_log_p") is not None]
    if not bounded:
        return {}
    upper = [r for r in bounded if not r["gl_exact_path"]]
    return {"gl_windows": len(bounded), "gl_exact_paths": len(bounded) - len(upper),
            "max_gl_log_p": max(r["gl_log_p"] for r in bounded),
            "share_gl_ruled_out": sum(r["gl_ruled_out"][0] for r in upper) / len(bounded)}
