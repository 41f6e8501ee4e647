"""What a chat API answered, read from its stored bytes: the text of each choice, why it stopped, the provider's
`usage` and identifiers, and the generated tokens' log-probs where the API returns them (tier GL).

A pure function of the response bytes, so that the evidence record's numbers can be recomputed from the record
alone (`mia verify`). An answer that is not what an OpenAI-compatible API sends is refused with one sentence naming
what is wrong and where, never read as an empty or zero answer.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any


class AnswerError(ValueError):
    """An answer that cannot be read as an OpenAI-compatible chat or completions answer."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, log-prob, and the top alternatives the API returned (token → log-prob)."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Choice:
    """One generated answer: its text (None when the API gave none), why it stopped, its tokens' log-probs (GL)."""

    text: str | None
    finish_reason: str | None
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class ChatAnswer:
    """A parsed answer: its choices, `usage` (None when the API gave none), and the identifiers it carried."""

    choices: tuple[Choice, ...]
    input_tokens: int | None
    output_tokens: int | None
    model: str | None
    """The model string *as returned* (a provider may answer with another, dated name than the one asked for)."""
    answer_id: str | None = None
    system_fingerprint: str | None = None
    created: int | None = None

    @property
    def text(self) -> str | None:
        """The first choice's text."""
        return self.choices[0].text if self.choices else None

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason if self.choices else None


def parse_answer(content: bytes, api: str) -> ChatAnswer:
    """The `ChatAnswer` in a 200 answer's bytes (`api`: "chat" or "completions"), or an `AnswerError`."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        snippet = " ".join(content[:80].decode("utf-8", errors="replace").split())
        raise AnswerError(f"the answer is not JSON ({snippet!r})") from None
    if not isinstance(data, dict):
        raise AnswerError(f"the answer is a JSON {type(data).__name__}, not an object")
    raw_choices = data.get("choices")
    if not isinstance(raw_choices, list) or not raw_choices:
        raise AnswerError("the answer has no choices (an OpenAI-compatible answer lists them in 'choices')")
    choices = tuple(_choice(item, api, n) for n, item in enumerate(raw_choices))
    usage = data.get("usage")
    input_tokens = output_tokens = None
    if usage is not None:
        if not isinstance(usage, dict):
            raise AnswerError(f"'usage' is a {type(usage).__name__}, not an object")
        input_tokens = _count(usage.get("prompt_tokens"), "usage.prompt_tokens")
        output_tokens = _count(usage.get("completion_tokens"), "usage.completion_tokens")
    return ChatAnswer(choices, input_tokens, output_tokens, _text_or_none(data.get("model"), "model"),
                      _text_or_none(data.get("id"), "id"), _text_or_none(data.get("system_fingerprint"),
                                                                           "system_fingerprint"),
                      data.get("created") if isinstance(data.get("created"), int) else None)


def _choice(item: Any, api: str, n: int) -> Choice:
    where = f"choices[{n}]"
    if not isinstance(item, dict):
        raise AnswerError(f"{where} is a {type(item).__name__}, not an object")
    if api == "chat":
        message = item.get("message")
        if message is not None and not isinstance(message, dict):
            raise AnswerError(f"{where}.message is a {type(message).__name__}, not an object")
        text = _text_or_none((message or {}).get("content"), f"{where}.message.content")
    else:
        text = _text_or_none(item.get("text"), f"{where}.text")
    finish = _text_or_none(item.get("finish_reason"), f"{where}.finish_reason")
    raw = item.get("logprobs")
    logprobs = None if raw is None else (_chat_logprobs(raw, where) if api == "chat" else _completion_logprobs(raw, where))
    return Choice(text, finish, logprobs)


def _chat_logprobs(raw: Any, where: str) -> tuple[TokenLogprob, ...] | None:
    """`logprobs.content`: [{token, logprob, top_logprobs: [{token, logprob}]}] (OpenAI's chat shape)."""
    if not isinstance(raw, dict):
        raise AnswerError(f"{where}.logprobs is a {type(raw).__name__}, not an object")
    content = raw.get("content")
    if content is None:
        return None
    if not isinstance(content, list):
        raise AnswerError(f"{where}.logprobs.content is a {type(content).__name__}, not a list")
    out = []
    for t, entry in enumerate(content):
        at = f"{where}.logprobs.content[{t}]"
        if not isinstance(entry, dict):
            raise AnswerError(f"{at} is a {type(entry).__name__}, not an object")
        top = {}
        for alt in entry.get("top_logprobs") or []:
            if not isinstance(alt, dict):
                raise AnswerError(f"{at}.top_logprobs holds a {type(alt).__name__}, not an object")
            top[_text(alt.get("token"), f"{at}.top_logprobs.token")] = _logprob(alt.get("logprob"), f"{at}.top_logprobs")
        out.append(TokenLogprob(_text(entry.get("token"), f"{at}.token"), _logprob(entry.get("logprob"), at), top))
    return tuple(out)


def _completion_logprobs(raw: Any, where: str) -> tuple[TokenLogprob, ...]:
    """`logprobs`: {tokens, token_logprobs, top_logprobs: [{token: logprob}]} (the completions shape)."""
    if not isinstance(raw, dict):
        raise AnswerError(f"{where}.logprobs is a {type(raw).__name__}, not an object")
    tokens, values, tops = raw.get("tokens") or [], raw.get("token_logprobs") or [], raw.get("top_logprobs") or []
    if not all(isinstance(x, list) for x in (tokens, values, tops)) or len(tokens) != len(values) \
            or tops and len(tops) != len(tokens):
        raise AnswerError(f"{where}.logprobs: tokens, token_logprobs and top_logprobs are not lists of one length")
    out = []
    for t, (token, value) in enumerate(zip(tokens, values)):
        at = f"{where}.logprobs position {t}"
        top_raw = tops[t] if tops else {}
        if not isinstance(top_raw, dict):
            raise AnswerError(f"{at}: top_logprobs is a {type(top_raw).__name__}, not an object")
        top = {_text(k, at): _logprob(v, f"{at} top") for k, v in top_raw.items()}
        out.append(TokenLogprob(_text(token, at), _logprob(value, at), top))
    return tuple(out)


def _logprob(value: Any, where: str) -> float:
    """A log-prob: a finite number ≤ 0 (a server's rounding may give a tiny positive value: up to 1e-4 is read as 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnswerError(f"{where}: the log-prob is {value!r}, not a number")
    if not math.isfinite(value) or value > 1e-4:
        raise AnswerError(f"{where}: the log-prob {value!r} is impossible (a log-prob is finite and at most 0)")
    return min(float(value), 0.0)


def _count(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AnswerError(f"{where} is {value!r}, not a count of tokens")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise AnswerError(f"{where} is {value!r}, not text")
    return value


def _text_or_none(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)
