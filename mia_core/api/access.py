"""Model access: what a model lets a method read, and what a method needs of it — one vocabulary for both.

A model declares the access it offers (`ModelAccess`: the in-process transformers model offers everything; a
served model offers what its server returns); a method declares what it needs (`AccessNeeds`). `refusal` says,
in one sentence, why a model does not allow a method — nothing falls back silently to an approximation.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

#: `ModelAccess.top_k` of a model that returns the log-prob of every vocabulary entry.
FULL_VOCABULARY = 2**31 - 1

#: The vocabulary, in words for method lists and refusals.
ACCESS = {
    "token_logprob": "the log-prob of each true token",
    "top_k": "the top-k log-probs at each position",
    "full_distribution": "the whole next-token distribution at each position (its mean, spread, entropy, top token "
                         "and the true token's rank)",
    "further_passes": "further passes of the model on texts of the method's own making",
    "gradients": "gradients through the model's weights",
    "generation": "sampled generation",
    "tokens": "the model's own tokens (texts cut into its token ids, and prompts given as token ids)",
}

#: Short words for each, for tables.
ACCESS_SHORT = {"token_logprob": "token log-probs", "top_k": "top-k log-probs", "full_distribution": "full distribution",
                "further_passes": "further passes", "gradients": "gradients", "generation": "generation",
                "tokens": "its tokenizer"}


@dataclass(frozen=True)
class Access:
    """The entries of `ACCESS`, offered by a model or needed by a method; `top_k` counts log-probs per position."""

    token_logprob: bool = True
    top_k: int = 0
    full_distribution: bool = False
    further_passes: bool = False
    gradients: bool = False
    generation: bool = False
    tokens: bool = True
    """The model's own tokenizer: every in-process or served model has it; a chat API, which takes and returns text,
    does not."""


@dataclass(frozen=True)
class ModelAccess(Access):
    """What a model offers; `top_k` is how many log-probs per position it returns (`FULL_VOCABULARY`: all);
    `where` names the model in sentences ("this model", "this server")."""

    where: str = "this model"
    hint: str = ""
    """What would give more log-probs (a served model: "logprobs=full in the spec …"), said where log-probs fall short."""

    def describe_logprobs(self) -> str:
        """What it returns per token, e.g. "this server returns 20 log-probs per token"."""
        if self.full_distribution or self.top_k >= FULL_VOCABULARY:
            return f"{self.where} returns the whole next-token distribution"
        if self.top_k > 0:
            return f"{self.where} returns {self.top_k} log-prob{'' if self.top_k == 1 else 's'} per token"
        if self.token_logprob:
            return f"{self.where} returns only the true token's log-prob"
        return f"{self.where} returns no log-probs"


#: The in-process transformers model: every kind of access.
FULL_ACCESS = ModelAccess(True, FULL_VOCABULARY, True, True, True, True)


@dataclass(frozen=True)
class AccessNeeds(Access):
    """What a method reads of the model; `why` says what for, in the method's refusal."""

    why: str = ""
    """What it reads, in the words of its refusal ("the mean and spread of the full next-token distribution")."""

    def words(self) -> list[str]:
        """The short words of what it needs, for method lists."""
        out = []
        for f in fields(Access):
            value = getattr(self, f.name)
            if f.name == "tokens":  # every method works on tokens: not worth a word in lists
                continue
            if f.name == "top_k":
                if value:
                    out.append(f"top-{value} log-probs")
            elif value:
                out.append(ACCESS_SHORT[f.name])
        return out


def refusal(offer: ModelAccess, needs: AccessNeeds, label: str) -> str | None:
    """None when `offer` covers `needs`, else the sentence that says why not (the first need it lacks)."""
    def says(generic: str) -> str:
        return f"{label} needs {needs.why or generic}"

    short = f"{offer.describe_logprobs()}{f' ({offer.hint})' if offer.hint else ''}."
    if needs.full_distribution and not offer.full_distribution:
        return f"{says(ACCESS['full_distribution'])}; {short}"
    if needs.top_k > max(offer.top_k, FULL_VOCABULARY if offer.full_distribution else 0):
        return f"{says(f'the top {needs.top_k} log-probs at each position')}; {short}"
    if needs.token_logprob and not offer.token_logprob:
        return f"{says(ACCESS['token_logprob'])}; {short}"
    if needs.tokens and not offer.tokens:
        return f"{says(ACCESS['tokens'])}; {offer.where} takes and returns text only."
    for name, lacks in (("further_passes", "scores only the texts it is given"),
                        ("gradients", "gives no gradients"), ("generation", "does not generate text")):
        if getattr(needs, name) and not getattr(offer, name):
            return f"{says(ACCESS[name])}; {offer.where} {lacks}."
    return None
