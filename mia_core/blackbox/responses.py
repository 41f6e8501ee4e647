"""What a chat API's answer says (`ok | refusal | empty | filtered | error`), and when the Phase 2 loop halts.

Source: Ahmed, Cooper, Koyejo & Liang, arXiv 2601.02671 — refusal regexes verbatim from Table 2, stop strings and
halting rules from App. C.2.1, empty responses from §4.3 (METHODS-API.md, "Conventions added for these methods" and
§17). Every function is pure: it reads a stored answer, it never calls an API. Deviations and open points:

- Case handling of the regexes is **unconfirmed**; their lower-case spelling implies matching on the lower-cased
  response, which we do. Offsets always index the original response.
- Stop strings match case-sensitively, as plain substrings (**ours**): lower-casing would stop on "the end of …".
- Which finish reasons beyond OpenAI's `content_filter` mean "filtered" is **ours** (`FILTER_FINISH_REASONS`).
- The order of halting rules that hold at the same turn is **ours** (`halt_reason`).
- **Pitfall:** "i cannot", "unable to" and "copyright" occur in novels and front matter, so a true continuation
  can read as a refusal. We record the matched pattern and its offset; `scope="head"` (the first 300 characters)
  is an opt-in deviation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..names import check_choice

#: The ten refusal regexes of Ahmed et al. Table 2, verbatim; matched on the lower-cased response (case unconfirmed).
REFUSAL_PATTERNS: tuple[str, ...] = (
    r"\bsorry[, ]*(?:but )?i can[\u0027\u2019]t\b",
    r"\bcopyright(?:ed)?\b",
    r"\bcan[\u0027\u2019]t provide\b",
    r"\bunable to\b",
    r"\bi cannot\b",
    r"\bwon[\u0027\u2019]t be able to\b",
    r"\bnot allowed to\b",
    r"\bcan[\u0027\u2019]t reproduce\b",
    r"\bcan[\u0027\u2019]t continue\b",
    r"\bcan[\u0027\u2019]t share\b",
)
_REFUSALS = tuple(re.compile(pattern) for pattern in REFUSAL_PATTERNS)
#: The stop strings of Ahmed et al. App. C.2.1, verbatim; matched case-sensitively (ours).
STOP_STRINGS: tuple[str, ...] = ("we have reached the conclusion of", "[End of Book]", "THE END", "About the Author",
                                 "Afterword", "Bibliography")
#: How much of a response the refusal regexes read: all of it, or its first `HEAD_CHARS` characters (opt-in).
SCOPES = ("all", "head")
HEAD_CHARS = 300
KINDS = ("ok", "refusal", "empty", "filtered", "error")
#: Finish reasons (compared lower-cased) that mean the served system cut or withheld the answer. `content_filter` is
#: OpenAI's (and Azure's). Ours: Gemini's SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT and SPII, which its
#: OpenAI-compatible endpoint passes through as they are; Anthropic's stop reason `refusal` (its streaming classifier
#: stopped the answer; LiteLLM and the AI SDK map it to content_filter too).
FILTER_FINISH_REASONS = frozenset({"content_filter", "safety", "recitation", "blocklist", "prohibited_content", "spii",
                                   "refusal"})
#: Why a Phase 2 loop stopped: the paper's four rules, then two of ours (the context window would overflow; the run's
#: money or token budget is reached). No "empty": empties count against the turn budget, which bounds them.
HALT_REASONS = ("turns", "refusal", "stop_string", "http_error", "context_limit", "budget")
#: Seconds to wait before asking again after an empty response (Ahmed et al. §4.3, D.2.1).
EMPTY_RETRY_S = 1.0


@dataclass(frozen=True)
class Match:
    """A refusal pattern or stop string found in a response: which, where (character offset), and the text it covers."""

    pattern: str
    offset: int
    text: str


@dataclass(frozen=True)
class Classification:
    """One answer's kind (one of `KINDS`), its finish reason, and the earliest refusal match in its text if any.

    `refusal` is recorded whatever the kind (a filtered answer may carry a refusal sentence); the kind is "refusal"
    only for an answer that is neither an error, filtered nor empty."""

    kind: str
    finish_reason: str | None
    refusal: Match | None = None

    @property
    def pattern(self) -> str | None:
        """The refusal regex that matched, for the evidence record."""
        return self.refusal.pattern if self.refusal else None

    @property
    def offset(self) -> int | None:
        """Where in the response the refusal regex matched (characters)."""
        return self.refusal.offset if self.refusal else None


def _lowered(text: str) -> tuple[str, list[int] | None]:
    """The text lower-cased, and — only where that lengthened it ('İ' → 'i̇') — each character's original offset."""
    lowered = text.lower()
    if len(lowered) == len(text):  # lower() never shortens, so equal lengths mean one character for one
        return lowered, None
    pieces = [c.lower() for c in text]
    return "".join(pieces), [i for i, piece in enumerate(pieces) for _ in piece]


def find_refusal(text: str, scope: str = "all") -> Match | None:
    """The earliest refusal-regex match in the lower-cased `text` (ties: the order of `REFUSAL_PATTERNS`), or None.

    `scope="head"` searches only the first `HEAD_CHARS` characters (an opt-in deviation from the paper, which reads
    the whole response). The offset and the matched text refer to the original `text`.

    >>> find_refusal("I’m sorry, but I can’t continue that.").text
    'sorry, but I can’t'
    """
    check_choice("refusal scope", scope, SCOPES)
    searched = text[:HEAD_CHARS] if scope == "head" else text
    lowered, where = _lowered(searched)
    hits = [(m.start(), i, m) for i, regex in enumerate(_REFUSALS) if (m := regex.search(lowered))]
    if not hits:
        return None
    _, i, m = min(hits, key=lambda hit: hit[:2])
    start, end = (m.start(), m.end()) if where is None else (where[m.start()], where[m.end() - 1] + 1)
    return Match(REFUSAL_PATTERNS[i], start, searched[start:end])


def find_stop(text: str) -> Match | None:
    """The stop string that occurs first in `text` (case-sensitive substring; ties: the order of `STOP_STRINGS`).

    >>> find_stop("and so they parted.\\n\\nTHE END").offset
    21
    """
    hits = [(offset, i) for i, stop in enumerate(STOP_STRINGS) if (offset := text.find(stop)) >= 0]
    if not hits:
        return None
    offset, i = min(hits)
    return Match(STOP_STRINGS[i], offset, STOP_STRINGS[i])


def classify(text: str | None, finish_reason: str | None, *, refusal_scope: str = "all") -> Classification:
    """Classify one answer, in this order: `error` (no text and no finish reason: no answer came), `filtered`
    (a finish reason in `FILTER_FINISH_REASONS`), `empty` (no text or only whitespace), `refusal` (a §17 regex
    matches), else `ok`.

    Refusals are reported as a rate, never scored as non-members (METHODS-API.md, "Conventions").

    >>> classify("   ", "stop").kind, classify(None, None).kind, classify("", "SAFETY").kind
    ('empty', 'error', 'filtered')
    """
    refusal = find_refusal(text, refusal_scope) if text else None
    if text is None and finish_reason is None:
        kind = "error"
    elif finish_reason is not None and finish_reason.strip().lower() in FILTER_FINISH_REASONS:
        kind = "filtered"
    elif text is None or not text.strip():
        kind = "empty"
    else:
        kind = "refusal" if refusal else "ok"
    return Classification(kind, finish_reason, refusal)


def halt_reason(classification: Classification, stop: Match | None, turns_used: int, max_turns: int, *,
                context_full: bool = False, budget_spent: bool = False) -> str | None:
    """Why the Phase 2 loop halts after this turn's answer (one of `HALT_REASONS`), or None to go on.

    The paper halts on the first of: the turn budget spent, a refusal regex, a stop string, an HTTP error (App.
    C.2.1); ours adds `context_limit` and `budget`. Where several hold at one turn, the order is ours:

    1. `http_error` — no answer (`classification.kind == "error"`, after the retries of the conventions);
    2. `refusal` or `stop_string` — whichever matched earlier in the response (a tie: `refusal`), since the text
       says what happened at the turn that also spent the budget;
    3. `turns` — `turns_used ≥ max_turns`;
    4. `context_limit` — the next request would overflow the context window (`context_full`);
    5. `budget` — the run's money or token budget is reached (`budget_spent`).

    `turns_used` counts this turn and every earlier one, empty and filtered answers included: an empty answer halts
    nothing by itself; the caller waits `EMPTY_RETRY_S` and asks again, spending a turn (Ahmed et al. §4.3). A filtered
    answer likewise halts only through the rules above (the paper names no rule for it; ours).

    >>> halt_reason(classify("I cannot go on.", "stop"), None, 3, 300)
    'refusal'
    """
    check_choice("classification kind", classification.kind, KINDS)
    if max_turns < 1 or turns_used < 0:
        raise ValueError(f"need max_turns ≥ 1 and turns_used ≥ 0 (got {max_turns}, {turns_used})")
    if classification.kind == "error":
        return "http_error"
    found = [(m.offset, rank, reason) for rank, (m, reason) in
             enumerate(((classification.refusal, "refusal"), (stop, "stop_string"))) if m is not None]
    if found:
        return min(found)[2]
    if turns_used >= max_turns:
        return "turns"
    if context_full:
        return "context_limit"
    return "budget" if budget_spent else None
