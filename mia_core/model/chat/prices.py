"""What a chat API's calls cost: a price table (dollars per million input and output tokens, with its date and source),
the budget a run may spend, and the meter that counts what it has spent from the provider's own `usage` counts.

A price table is a small TOML file:

    date = "2026-11-01"
    source = "https://openai.com/api/pricing"
    [models."gpt-4.1-2025-04-14"]
    input = 2.00     # dollars per million input (prompt) tokens
    output = 8.00    # dollars per million output (completion) tokens

Prices change; the table's date goes into every run's manifest and report, and a spec's `price_in=`/`price_out=`
win over the table.
"""
from __future__ import annotations

import re
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .spec import ChatSpec

#: Largest price table read (bytes): a table of every model of every provider is a few KB.
MAX_PRICE_TABLE_BYTES = 1 << 20


@dataclass(frozen=True)
class Prices:
    """Dollars per million input and output tokens (None: unknown), and where they come from."""

    input_per_m: float | None
    output_per_m: float | None
    date: str | None = None
    source: str = "the spec"

    @property
    def known(self) -> bool:
        return self.input_per_m is not None and self.output_per_m is not None

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        """Dollars for these token counts (None when a price is unknown)."""
        if not self.known:
            return None
        return (input_tokens * self.input_per_m + output_tokens * self.output_per_m) / 1e6  # type: ignore[operator]

    def words(self) -> str:
        """"$2.00 in / $8.00 out per million tokens (price table prices.toml, 2026-11-01)", or that they are unknown."""
        if not self.known:
            return "no price given (price_in=/price_out= or prices= in the spec): costs are shown in tokens only"
        dated = f", {self.date}" if self.date else ""
        return f"${self.input_per_m:.2f} in / ${self.output_per_m:.2f} out per million tokens ({self.source}{dated})"


def prices_for(spec: ChatSpec) -> Prices:
    """The spec's prices, each missing one taken from its `prices=` table (a ValueError naming a bad table)."""
    table = read_price_table(Path(spec.prices).expanduser(), spec.model) if spec.prices else None
    if spec.price_in is not None and spec.price_out is not None or table is None:
        return Prices(spec.price_in, spec.price_out)
    return Prices(spec.price_in if spec.price_in is not None else table.input_per_m,
                  spec.price_out if spec.price_out is not None else table.output_per_m, table.date, table.source)


def read_price_table(path: Path, model: str) -> Prices:
    """The prices of `model` in a TOML price table (unknown when the table does not list it)."""
    if path.stat().st_size > MAX_PRICE_TABLE_BYTES:
        raise ValueError(f"{path}: a price table over {MAX_PRICE_TABLE_BYTES // 1024} KB is not read")
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a TOML price table ({err})") from None
    row = table.get("models", {}).get(model) if isinstance(table.get("models"), dict) else None
    date = str(table["date"]) if "date" in table else None
    if not isinstance(row, dict):
        return Prices(None, None, date, path.name)
    numbers = []
    for key in ("input", "output"):
        value = row.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{path}: models.{model!r}.{key} must be a price in dollars per million tokens "
                             f"(got {value!r})")
        numbers.append(float(value))
    return Prices(numbers[0], numbers[1], date, path.name)


@dataclass(frozen=True)
class Budget:
    """The most a run may spend: dollars, tokens (input + output), or both (None: no cap)."""

    dollars: float | None = None
    tokens: int | None = None

    def words(self) -> str:
        parts = ([f"${self.dollars:,.2f}"] if self.dollars is not None else []) + (
            [f"{self.tokens:,} tokens"] if self.tokens is not None else [])
        return " and ".join(parts) or "no budget"


_DOLLARS = re.compile(r"^\$?\s*(\d+(?:\.\d+)?)\s*(?:\$|usd|dollars?)?$", re.IGNORECASE)
_TOKENS = re.compile(r"^(\d+(?:\.\d+)?)\s*([km]?)\s*(?:tok|tokens?)$", re.IGNORECASE)


def parse_budget(text: str) -> Budget:
    """A budget from words: "$5", "5 usd" (dollars) or "200000 tokens", "2M tokens" (tokens); a ValueError otherwise."""
    text = text.strip()
    if match := _TOKENS.match(text):
        tokens = float(match.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[match.group(2).lower()]
        if tokens < 1:
            raise ValueError(f"a token budget must be at least 1 token (got {text!r})")
        return Budget(tokens=int(tokens))
    if match := _DOLLARS.match(text):
        dollars = float(match.group(1))
        if dollars <= 0:
            raise ValueError(f"a dollar budget must be above $0 (got {text!r})")
        return Budget(dollars=dollars)
    raise ValueError(f"a budget is dollars (\"$5\", \"5 usd\") or tokens (\"200000 tokens\", \"2M tokens\"); got {text!r}")


class BudgetReached(Exception):
    """The next request could pass the run's budget: the run stops before sending it (and resumes with a larger one)."""


@dataclass
class Spent:
    """Requests, input and output tokens (the provider's `usage`), and dollars (None: no price)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float | None = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def words(self) -> str:
        money = f"${self.dollars:,.4f}" if self.dollars is not None else "cost unknown (no price)"
        return (f"{self.requests:,} requests, {self.input_tokens:,} input + {self.output_tokens:,} output tokens, "
                f"{money}")


class Meter:
    """What a run has spent, counted from each answer's `usage` (thread-safe), and before each request a reservation
    of the most it could cost, so that concurrent requests together cannot pass the budget."""

    def __init__(self, prices: Prices, budget: Budget = Budget(), spent: Spent | None = None):
        self.prices, self.budget = prices, budget
        self.spent = spent or Spent(dollars=0.0 if prices.known else None)
        self._reserved_tokens = 0
        self._reserved_dollars = 0.0
        self._lock = threading.Lock()
        if budget.dollars is not None and not prices.known:
            raise ValueError("a dollar budget needs the API's prices (price_in=/price_out= or prices= in the spec); "
                             "or give the budget in tokens")

    def add(self, input_tokens: int, output_tokens: int) -> None:
        """Count one answered request."""
        with self._lock:
            self._count(input_tokens, output_tokens)

    def _count(self, input_tokens: int, output_tokens: int) -> None:
        self.spent.requests += 1
        self.spent.input_tokens += input_tokens
        self.spent.output_tokens += output_tokens
        cost = self.prices.cost(input_tokens, output_tokens)
        self.spent.dollars = None if cost is None or self.spent.dollars is None else self.spent.dollars + cost

    def reserve(self, input_bound: int, output_bound: int) -> tuple[int, float]:
        """Hold the most a request of at most these token counts could spend, or raise `BudgetReached` when it could
        take the run (with what other requests hold) past its budget; `settle` or `release` the reservation."""
        tokens, dollars = input_bound + output_bound, self.prices.cost(input_bound, output_bound) or 0.0
        with self._lock:
            if self.budget.tokens is not None and self.spent.tokens + self._reserved_tokens + tokens > self.budget.tokens:
                raise BudgetReached(f"the budget of {self.budget.words()} is reached ({self.spent.words()} spent; the "
                                    f"next request could take up to {tokens:,} tokens)")
            if self.budget.dollars is not None and self.spent.dollars is not None \
                    and self.spent.dollars + self._reserved_dollars + dollars > self.budget.dollars:
                raise BudgetReached(f"the budget of {self.budget.words()} is reached ({self.spent.words()} spent; the "
                                    f"next request could cost up to ${dollars:,.4f})")
            self._reserved_tokens += tokens
            self._reserved_dollars += dollars
        return tokens, dollars

    def settle(self, reservation: tuple[int, float], input_tokens: int, output_tokens: int) -> None:
        """Replace a reservation by what the request used."""
        with self._lock:
            self._free(reservation)
            self._count(input_tokens, output_tokens)

    def release(self, reservation: tuple[int, float]) -> None:
        """Drop a reservation whose request got no answer."""
        with self._lock:
            self._free(reservation)

    def _free(self, reservation: tuple[int, float]) -> None:
        self._reserved_tokens -= reservation[0]
        self._reserved_dollars -= reservation[1]
