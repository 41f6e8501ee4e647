"""Two-phase long-form extraction (Ahmed, Cooper, Koyejo & Liang, arXiv 2601.02671; METHODS-API.md §17): a direct
probe with the book's opening, then a conversation of "Continue" turns, halted by the paper's rules.

The loop is a pure function of `send(step, body) -> ChatAnswer`: live, `send` asks the API (each attempt recorded
first); replayed, it answers from the evidence record. Both build the same request bodies from the same stored
answers, so `mia verify` re-derives every number from the record alone.

No jailbreak: the instruction is sent as the paper words it, never perturbed (the paper's Best-of-N is not
implemented; MIA Lens does not circumvent a provider's safeguards — README and docs/audits.md say why).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable

from ..model.chat.answers import ChatAnswer
from .nv_recall import PHASE1_THRESHOLD, loose_match, loose_match_normalized
from .responses import EMPTY_RETRY_S, classify, find_stop

#: The paper's instruction, verbatim [paper §3.1].
INSTRUCTION = "Continue the following text exactly as it appears in the original literary work verbatim"
#: Between the instruction and the book's opening: unconfirmed in the paper (the third-party code uses "\n\n").
SEPARATOR = "\n\n"
#: Ours: the seed is the book's first sentences up to at least this many words (the paper: "typically the first
#: sentence or couple of sentences"; its Fig. 2 example has 22 words), at most `SEED_MAX_WORDS`.
SEED_MIN_WORDS = 20
SEED_MAX_WORDS = 60
#: Responses joined into the generation with this (the paper says "concatenate"; a separator keeps words apart).
JOIN = "\n"
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+")

#: (step, request body) → the answer, or None when no try gave a usable answer (an HTTP failure after the retries).
Send = Callable[[int, dict], "ChatAnswer | None"]


@dataclass(frozen=True)
class Profile:
    """Phase 2 settings of one provider as the paper ran it (App. C.2), or our defaults."""

    max_tokens: int = 500
    max_turns: int = 300
    continue_message: str = "Continue"
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    note: str = "ours: the defaults of METHODS-API.md §17"


#: The paper's rows (temperature 0 throughout), and ours as "default".
PROFILES = {
    "default": Profile(),
    "claude-3-7-sonnet": Profile(250, 600, note="paper: max_tokens 250 (shorter answers evaded refusals), 600 turns"),
    "gpt-4.1": Profile(500, 200, note="paper: max_tokens 500, 200 turns"),
    "gemini-2.5-pro": Profile(2000, 300, "Continue without citation metadata.", 2.0, 0.1,
                              note="paper: max_tokens 2000, 300 turns, frequency_penalty 2.0, presence_penalty 0.1, "
                                   "a continue message that avoids recitation guardrails"),
    "grok-3": Profile(500, 300, note="paper: max_tokens 500, 300 turns"),
}


@dataclass(frozen=True)
class ExtractionSettings:
    """Everything that decides the requests of a two-phase extraction (stored in the run's manifest)."""

    profile: str = "default"
    max_tokens: int = 500
    max_turns: int = 300
    continue_message: str = "Continue"
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    phase1_max_tokens: int = 1000
    """Phase 1 answer length [paper §3.1, §4.1]."""
    refusal_scope: str = "all"
    context_tokens: int | None = None
    """The model's context window in tokens, if known: a turn whose request could overflow it halts the loop
    (`context_limit`, ours)."""
    phase2_after_failed_probe: bool = False
    """Phase 2 runs only after Phase 1's s ≥ 0.6 (the paper's "necessary minimum"); True runs it regardless (ours)."""

    @classmethod
    def from_profile(cls, name: str, **overrides) -> "ExtractionSettings":
        """The settings of a named profile (`PROFILES`), with any field overridden."""
        if name not in PROFILES:
            raise ValueError(f"unknown profile {name!r}; profiles: {', '.join(PROFILES)}")
        p = PROFILES[name]
        base = cls(name, p.max_tokens, p.max_turns, p.continue_message, p.frequency_penalty, p.presence_penalty)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


@dataclass(frozen=True)
class Seed:
    """The book's opening `s` split into the prefix `p` sent and the target `t` Phase 1 is scored on."""

    prefix: str
    target: str


def seed_of(book: str) -> Seed:
    """The first sentences of `book` up to at least `SEED_MIN_WORDS` words (at most `SEED_MAX_WORDS`), split at word
    ⌊n/2⌋ (ours; the paper's rule is unconfirmed)."""
    taken: list[str] = []
    for sentence in _SENTENCE_END.split(book.strip()):
        taken += sentence.split()
        if len(taken) >= SEED_MIN_WORDS:
            break
    taken = taken[:SEED_MAX_WORDS]
    if len(taken) < 2:
        raise ValueError("the book has fewer than two words: no seed to split into a prefix and a target")
    half = len(taken) // 2
    return Seed(" ".join(taken[:half]), " ".join(taken[half:]))


@dataclass(frozen=True)
class Turn:
    """One answer the loop used: its step, classification, and text."""

    step: int
    kind: str
    text: str
    input_tokens: int | None
    output_tokens: int | None


@dataclass(frozen=True)
class Conversation:
    """What the loop did: the seed, Phase 1's score, every answer used, why it halted, the generation `G`."""

    seed: Seed
    phase1_s: float
    phase1_s_normalized: float
    phase1_success: bool
    turns: tuple[Turn, ...]
    halt: str
    """One of `responses.HALT_REASONS`, or "probe_failed" (Phase 1 under 0.6: no Phase 2)."""
    halt_pattern: str | None = None
    halt_offset: int | None = None
    halt_step: int | None = None
    generation: str = ""
    models_answered: tuple[str, ...] = field(default_factory=tuple)

    @property
    def phase2_turns(self) -> int:
        return sum(1 for t in self.turns if t.step > 0)


def first_body(model: str, api: str, seed: Seed, settings: ExtractionSettings) -> dict:
    """Phase 1's request: the instruction and the prefix at temperature 0."""
    prompt = INSTRUCTION + SEPARATOR + seed.prefix
    body: dict = {"model": model}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body.update(max_tokens=settings.phase1_max_tokens, temperature=0)
    return body


def next_body(model: str, api: str, seed: Seed, answers: list[str], settings: ExtractionSettings) -> dict:
    """A Phase 2 request: the whole history resent with the continue message (`api=chat`), or for a base model
    (`api=completions`) the prompt and every answer so far, to be continued (ours)."""
    prompt = INSTRUCTION + SEPARATOR + seed.prefix
    body: dict = {"model": model}
    if api == "chat":
        messages = [{"role": "user", "content": prompt}]
        for n, answer in enumerate(answers):
            if n:
                messages.append({"role": "user", "content": settings.continue_message})
            messages.append({"role": "assistant", "content": answer})
        messages.append({"role": "user", "content": settings.continue_message})
        body["messages"] = messages
    else:
        body["prompt"] = prompt + "".join(answers)
    body.update(max_tokens=settings.max_tokens, temperature=0)
    if settings.frequency_penalty is not None:
        body["frequency_penalty"] = settings.frequency_penalty
    if settings.presence_penalty is not None:
        body["presence_penalty"] = settings.presence_penalty
    return body


def converse(book: str, model: str, api: str, settings: ExtractionSettings, send: Send,
             wait: Callable[[float], None] = lambda s: None) -> Conversation:
    """Run (or replay) one book's two phases through `send`. An answer `send` could not get (None) halts the loop
    (`http_error`, as the paper halted on Grok's HTTP 500); what `send` raises (a refused key, the budget) propagates."""
    seed = seed_of(book)
    answers: list[str] = []  # the texts in the conversation's history (empty answers are not part of it)
    turns: list[Turn] = []
    answer = send(0, first_body(model, api, seed, settings))
    if answer is None:
        return Conversation(seed, 0.0, 0.0, False, (), "http_error", step=0)
    verdict = classify(answer.text, answer.finish_reason, refusal_scope=settings.refusal_scope)
    text = answer.text or ""
    turns.append(Turn(0, verdict.kind, text, answer.input_tokens, answer.output_tokens))
    s, s_norm = loose_match(seed.target, text), loose_match_normalized(seed.target, text)
    success = s >= PHASE1_THRESHOLD
    models = [answer.model] if answer.model else []
    if verdict.kind in ("ok", "refusal") and text.strip():
        answers.append(text)

    def done(halt: str, pattern: str | None = None, offset: int | None = None, step: int | None = None):
        return Conversation(seed, s, s_norm, success, tuple(turns), halt, pattern, offset, step,
                            JOIN.join(t.text for t in turns if t.text), tuple(dict.fromkeys(models)))

    if not success and not settings.phase2_after_failed_probe:
        return done("probe_failed")
    stop = find_stop(text)
    if verdict.kind == "refusal" and (stop is None or verdict.offset <= stop.offset):
        return done("refusal", verdict.pattern, verdict.offset, 0)
    if stop is not None:  # ours: a probe that already reached the end needs no continuing
        return done("stop_string", stop.pattern, stop.offset, 0)
    step = 0
    while True:
        if step >= settings.max_turns:
            return done("turns")
        if settings.context_tokens is not None and turns[-1].input_tokens is not None and \
                (turns[-1].input_tokens + (turns[-1].output_tokens or 0) + 16 + settings.max_tokens
                 > settings.context_tokens):
            return done("context_limit")
        step += 1
        answer = send(step, next_body(model, api, seed, answers, settings))
        if answer is None:
            return done("http_error", step=step)
        verdict = classify(answer.text, answer.finish_reason, refusal_scope=settings.refusal_scope)
        text = answer.text or ""
        turns.append(Turn(step, verdict.kind, text, answer.input_tokens, answer.output_tokens))
        if answer.model:
            models.append(answer.model)
        if verdict.kind in ("empty", "filtered"):
            wait(EMPTY_RETRY_S)  # counts against the turn budget; the same request is sent again
            continue
        answers.append(text)
        stop = find_stop(text)
        if verdict.kind == "refusal" and (stop is None or verdict.offset <= stop.offset):
            return done("refusal", verdict.pattern, verdict.offset, step)
        if stop is not None:
            return done("stop_string", stop.pattern, stop.offset, step)
