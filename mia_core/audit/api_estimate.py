"""What a chat API run may cost, said before it starts: at most (every text runs all its turns)
and about (each book recited to its end), in tokens and, with a price, dollars.

Both are estimates from the texts' UTF-8 bytes (≈ 4 bytes a token for English prose; the API's `usage` is what the
run counts), because no local tokenizer knows a production model's tokens. The history is resent each turn, so input
tokens grow with the square of the turns (METHODS-API.md §17, "Cost").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..blackbox.decop import EXAM_SYSTEM, ORDERS, DecopSettings, question
from ..blackbox.decop_passages import QuizBook
from ..blackbox.two_phase import INSTRUCTION, SEPARATOR, ExtractionSettings, seed_of
from ..model.chat.prices import Prices

#: Bytes per token assumed by the estimate (English prose through a modern BPE tokenizer).
BYTES_PER_TOKEN = 4.0
#: Tokens a chat template adds per message (role markers).
TEMPLATE_TOKENS = 8


@dataclass(frozen=True)
class Estimate:
    """Requests and tokens at most and about, and their dollars (None: no price)."""

    requests_max: int
    input_max: int
    output_max: int
    requests_about: int
    input_about: int
    output_about: int
    dollars_max: float | None
    dollars_about: float | None

    def words(self) -> str:
        def money(d: float | None) -> str:
            return f"${d:,.2f}" if d is not None else "cost unknown (no price)"
        return (f"at most {self.requests_max:,} requests, {self.input_max + self.output_max:,} tokens, "
                f"{money(self.dollars_max)} (every text runs all its turns); about {self.requests_about:,} requests, "
                f"{self.input_about + self.output_about:,} tokens, {money(self.dollars_about)} (each book recited to "
                "its end; the negative control stops after its probe)")


def _conversation(prompt_tokens: int, phase1: int, turn_tokens: int, turns: int) -> tuple[int, int, int]:
    """(requests, input, output) of a probe and `turns` continue turns, each resending the history."""
    inputs, history = prompt_tokens + TEMPLATE_TOKENS, prompt_tokens + TEMPLATE_TOKENS + phase1
    for _ in range(turns):
        history += 2 * TEMPLATE_TOKENS
        inputs += history
        history += turn_tokens
    return 1 + turns, inputs, phase1 + turns * turn_tokens


def estimate(texts: Sequence[tuple[str, str]], settings: ExtractionSettings, prices: Prices) -> Estimate:
    """The estimate for (text, role) pairs run with `settings` at `prices`."""
    most = [0, 0, 0]
    about = [0, 0, 0]
    for text, role in texts:
        prompt = int(len((INSTRUCTION + SEPARATOR + seed_of(text).prefix).encode()) / BYTES_PER_TOKEN) + 1
        for total, turns in ((most, settings.max_turns), (about, _turns_to_end(text, settings) if role == "book" else 0)):
            phase1 = settings.phase1_max_tokens if total is most else min(settings.phase1_max_tokens, _tokens(text))
            for n, value in enumerate(_conversation(prompt, phase1, settings.max_tokens, turns)):
                total[n] += value
    return Estimate(*most, *about, prices.cost(most[1], most[2]), prices.cost(about[1], about[2]))


def _tokens(text: str) -> int:
    return int(len(text.encode()) / BYTES_PER_TOKEN) + 1


def _turns_to_end(text: str, settings: ExtractionSettings) -> int:
    """Continue turns to recite the rest of a book after the probe's answer."""
    rest = max(0, _tokens(text) - settings.phase1_max_tokens)
    return min(settings.max_turns, -(-rest // settings.max_tokens))


def quiz_estimate(books: Sequence[QuizBook], settings: DecopSettings, prices: Prices) -> Estimate:
    """A DE-COP run: 24 requests per passage, each the question (its four options) and the system text, and
    `max_tokens` out; the same at most and about (every question is asked)."""
    requests = input_tokens = 0
    for book in books:
        for passage in book.passages:
            text = question(book.title, book.author, passage.options) + EXAM_SYSTEM
            requests += len(ORDERS)
            input_tokens += len(ORDERS) * (_tokens(text) + 2 * TEMPLATE_TOKENS)
    output = requests * settings.max_tokens
    dollars = prices.cost(input_tokens, output)
    return Estimate(requests, input_tokens, output, requests, input_tokens, output, dollars, dollars)
