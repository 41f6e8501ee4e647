"""SimMIA through a chat API (METHODS-API.md §20, step 3, "API backend"): for each context c ∈ {"", P} and each
position k = 1…L−1, the API is asked for the next word after c + w₀…w_{k−1} until N samples are in, then the text is
scored by `simmia.score_positions` (SimMIA*, and SimMIA where the run names an embedder).

`simmia_text` is a pure function of the answers `send(step, body)` returns: the steps are numbered from (context,
position, call) alone and every request's seed from (seed, text, context, position, call), so a resumed run sends the
same bytes and `mia verify` replays the text from the evidence record. The embedder is not in the settings: they name
it and its SHA-256, and the procedure asks `simmia.EMBEDDERS` for it, live and on replay (a replay without the same
weights is refused, never scored with others).

Ours, beside the authors' code: at most `max_calls` calls per position and context (theirs loops forever on answers
without samples); each call asks only the samples still missing; an empty, filtered or failed answer is no sample,
and neither is a refusal of more than one word (a one-word "refusal" such as "copyright" can be the right next word,
so it is a sample); refusals are counted as a rate. The authors strip each answer, as we do.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from ..model.chat.answers import ChatAnswer
from .responses import classify
from .simmia import MODES, embedder, nonmember_prefix, score_positions
from .simmia_words import word_tokenize

#: The authors' system prompt and user message for every API model [code `sampling/word_by_word.py`], verbatim.
SYSTEM_PROMPT = ("Return ONLY the single next token from the text. It can be punctuation or one whole word. No spaces, "
                 "no quotes, no extra text.")
USER_TEMPLATE = 'Text so far: "{prefix}"'
#: Tokens a completions API (no chat template) is asked for: the in-process backend's `max_new_tokens`.
COMPLETION_TOKENS = 3

Send = Callable[[int, dict], "ChatAnswer | None"]


@dataclass(frozen=True)
class SimMiaSettings:
    """Everything that decides a SimMIA run's requests and scores (stored in its manifest)."""

    nonmembers: tuple[str, ...] = ()
    """Known non-member texts (from outside the scored set) that make the prefix P."""
    nonmember_source: str = ""
    """Where they came from (a file name, a split), for the record."""
    samples: int = 10
    """N per position and context: the authors' 10 for WikiMIA-25, the benchmark they ran every API model on (100 on
    WikiMIA and MIMIR with open models would cost ten times the calls)."""
    per_request: int = 5
    """Samples asked per call (`n`): the authors' 5 for OpenAI and Gemini; 1 for an API without `n` (Anthropic)."""
    max_calls: int = 4
    """Calls per position and context at most (2 suffice at the defaults when every answer is a sample)."""
    system_prompt: str = SYSTEM_PROMPT
    user_template: str = USER_TEMPLATE
    """The user message; "{prefix}" is replaced by the text so far."""
    mode: str = "ours"
    """"ours" (P's texts each end with a blank line; the spec's smoothing) or "reference" (the code's: P joined with
    "", its smoothing)."""
    temperature: float | None = None
    """None: not sent (the provider's default, as the authors)."""
    max_tokens: int | None = None
    """None: not sent to a chat API (the authors' OpenAI call); a completions API gets 3 when None."""
    embedding: str | None = None
    """The registered word embedder SimMIA scores with (`simmia.EMBEDDERS`); None: SimMIA* only."""
    embedding_sha256: str | None = None
    """Its weights' SHA-256, checked at the run and at every replay."""
    exact_match_number: bool = False
    """SimMIA: ±1 for a number against a number (the authors' MIMIR `dm_mathematics` setting)."""
    seed: int = 42

    def __post_init__(self) -> None:
        object.__setattr__(self, "nonmembers", tuple(str(t) for t in self.nonmembers))  # a manifest gives a list
        if not any(t.strip() for t in self.nonmembers):
            raise ValueError("SimMIA needs known non-member texts for its prefix (from outside the scored set)")
        for name in ("samples", "per_request", "max_calls"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1 (got {getattr(self, name)})")
        if self.max_calls * self.per_request < self.samples:
            raise ValueError(f"max_calls × per_request ({self.max_calls} × {self.per_request}) cannot reach "
                             f"{self.samples} samples")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} (got {self.mode!r})")
        if (self.embedding is None) != (self.embedding_sha256 is None):
            raise ValueError("name the embedder and its SHA-256 together (or neither, for SimMIA* alone)")
        if "{prefix}" not in self.user_template:
            raise ValueError('the user message must hold "{prefix}", where the text so far goes')

    @property
    def variant(self) -> str:
        """"SimMIA" with an embedder, "SimMIA*" without: the name every output carries."""
        return "SimMIA*" if self.embedding is None else "SimMIA"


def request_body(model: str, api: str, prefix: str, settings: SimMiaSettings, *, n: int, seed: int) -> dict:
    """One request: the system prompt and the text so far in the user message (chat), or the text alone (completions,
    continued for `COMPLETION_TOKENS` tokens)."""
    body: dict = {"model": model}
    if api == "chat":
        body["messages"] = [{"role": "system", "content": settings.system_prompt},
                            {"role": "user", "content": settings.user_template.replace("{prefix}", prefix)}]
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
    else:
        body.update(prompt=prefix, max_tokens=settings.max_tokens or COMPLETION_TOKENS)
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    body.update(n=n, seed=seed)
    return body


def request_seed(seed: int, text: str, context: int, k: int, call: int) -> int:
    """A request's seed, fixed by the run's seed, the text, the context, the position and the call (31 bits)."""
    key = f"{seed}|{context}|{k}|{call}|{text}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big") & 0x7FFFFFFF


def is_sample(text: str | None, kind: str) -> bool:
    """An answer that counts as a sample: "ok", or a "refusal" of one word (a next word can match a refusal regex)."""
    return text is not None and (kind == "ok" or (kind == "refusal" and len(text.split()) == 1))


def simmia_text(text: str, model: str, api: str, settings: SimMiaSettings, send: Send,
                wait: Callable[[float], None] = lambda s: None) -> dict:
    """One text's samples through `send` and its scores: SimMIA* always, SimMIA where the settings name an embedder."""
    embed = embedder(settings.embedding, settings.embedding_sha256) if settings.embedding is not None else None
    words = word_tokenize(text)
    if len(words) < 2:
        raise ValueError(f"SimMIA scores the words after the first: this text has {len(words)} word(s)")
    contexts = ("", nonmember_prefix(settings.nonmembers, settings.mode))
    tally: Counter = Counter()
    models: dict[str, None] = {}
    drawn: list[list[list[str]]] = [[], []]
    for c, context in enumerate(contexts):
        prefix = context + words[0]
        for k in range(1, len(words)):
            found: list[str] = []
            for call in range(settings.max_calls):
                if len(found) >= settings.samples:
                    break
                step = (c * (len(words) - 1) + k - 1) * settings.max_calls + call
                body = request_body(model, api, prefix, settings, n=min(settings.per_request,
                                                                       settings.samples - len(found)),
                                    seed=request_seed(settings.seed, text, c, k, call))
                answer = send(step, body)
                _count(answer, found, tally, models)
            drawn[c].append(found[:settings.samples])
            prefix += words[k]
    scored = score_positions(words, drawn[0], drawn[1], embed=embed, exact_match_number=settings.exact_match_number,
                             mode=settings.mode)
    answers = tally["answers"]
    return {"variant": settings.variant, "simmia_star_score": scored.simmia_star, "simmia_score": scored.simmia,
            "embedding": None if embed is None else embed.name,
            "embedding_sha256": None if embed is None else embed.sha256,
            "n_words": len(words), "positions": len(words) - 1, "positions_scored": scored.n_scored,
            "positions_short": sum(min(p["n"], p["n_prefix"]) < settings.samples for p in scored.positions),
            "samples_per_position": settings.samples, "n_nonmembers": len(settings.nonmembers),
            "nonmember_source": settings.nonmember_source, "requests": tally["requests"], "answers": answers,
            "failed_requests": tally["failed"], "refusals": tally["refusal"],
            "empty": tally["empty"] + tally["filtered"] + tally["error"],
            "refusal_rate": tally["refusal"] / answers if answers else None,
            "input_tokens": tally["input_tokens"], "output_tokens": tally["output_tokens"],
            "models_answered": list(models), "words": scored.positions}


def _count(answer: ChatAnswer | None, found: list[str], tally: Counter, models: dict[str, None]) -> None:
    """Add an answer's samples to `found` and its choices, kinds and usage to the tally."""
    tally["requests"] += 1
    if answer is None:  # the call failed after its retries (each attempt is in the record)
        tally["failed"] += 1
        return
    tally["input_tokens"] += answer.input_tokens or 0
    tally["output_tokens"] += answer.output_tokens or 0
    if answer.model is not None:
        models[answer.model] = None
    for choice in answer.choices:
        kind = classify(choice.text, choice.finish_reason).kind
        tally["answers"] += 1
        tally[kind] += 1
        if is_sample(choice.text, kind):
            found.append(choice.text.strip())
