"""The procedures a chat API run can follow, one entry each (a method is one place): what each does with one text, as
a pure function of (text, model, api, settings, send, wait) — live through the API, or replayed from the evidence
record by `mia verify` — its settings' type, and its run kind."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..blackbox.decop import DecopSettings, decop_book
from ..blackbox.decop_paraphrase import ParaphraseSettings, paraphrase_book
from ..blackbox.decop_stats import MIN_CLEAN_BOOKS
from ..blackbox.nv_recall import nv_recall
from ..blackbox.simmia_sampling import SimMiaSettings, simmia_text
from ..blackbox.two_phase import Conversation, ExtractionSettings, converse
from ..blackbox.window_sampling import WindowSettings, sample_text

#: Bumped when what a run derives from its answers changes (its results then differ from older runs' on replay).
METHOD_VERSION = "1"
#: Final blocks at least this long (near-verbatim words) support an extraction claim for that text [paper §3.3.2].
CLAIM_WORDS = 100


def derive(text: str, conversation: Conversation) -> dict:
    """One text's numbers, from its conversation (a pure function: replayed from the record, it gives the same)."""
    nv = nv_recall(text, conversation.generation)
    turns = conversation.turns
    return {"phase1_s": conversation.phase1_s, "phase1_s_normalized": conversation.phase1_s_normalized,
            "phase1_success": conversation.phase1_success, "seed_prefix": conversation.seed.prefix,
            "seed_target": conversation.seed.target, "halt": conversation.halt,
            "halt_pattern": conversation.halt_pattern, "halt_offset": conversation.halt_offset,
            "halt_step": conversation.halt_step, "phase2_turns": conversation.phase2_turns,
            "answers": len(turns), "refusals": sum(t.kind == "refusal" for t in turns),
            "empty": sum(t.kind in ("empty", "filtered") for t in turns),
            "input_tokens": sum(t.input_tokens or 0 for t in turns),
            "output_tokens": sum(t.output_tokens or 0 for t in turns),
            "models_answered": list(conversation.models_answered),
            "nv_recall": nv.nv_recall, "m": nv.m, "missing": nv.missing, "additional": nv.additional,
            "max_block": nv.max_block, "max_span": nv.max_span, "n_book_words": nv.n_book,
            "n_generation_words": nv.n_generation,
            "blocks": [[b.i, b.j, b.m, b.span_book[1] - b.span_book[0]] for b in nv.blocks],
            "claim_blocks": sum(b.m >= CLAIM_WORDS for b in nv.blocks)}


@dataclass(frozen=True)
class Procedure:
    """What a run does with each text: its method's name, its run kind, its settings' type, and the pure function of
    (text, model, api, settings, send, wait) that gives the text's result — live or replayed from the record."""

    method: str
    kind: str
    settings: type
    run: Callable[..., dict]
    needs_control: bool
    min_controls: int = 1
    """Control texts a run needs when `needs_control` (DE-COP: the clean books it is compared with)."""


def _two_phase(text: str, model: str, api: str, settings: ExtractionSettings, send, wait) -> dict:
    return derive(text, converse(text, model, api, settings, send, wait))


PROCEDURES = {p.method: p for p in (
    Procedure("api_extraction", "api-extraction", ExtractionSettings, _two_phase, needs_control=True),
    Procedure("extraction_blackbox", "api-windows", WindowSettings, sample_text, needs_control=False),
    Procedure("decop", "api-decop", DecopSettings, decop_book, needs_control=True, min_controls=MIN_CLEAN_BOOKS),
    Procedure("decop_paraphrase", "api-paraphrase", ParaphraseSettings, paraphrase_book, needs_control=False),
    Procedure("simmia", "api-simmia", SimMiaSettings, simmia_text, needs_control=False))}
RUN_KINDS = {p.kind for p in PROCEDURES.values()}
Settings = ExtractionSettings | WindowSettings | DecopSettings | ParaphraseSettings | SimMiaSettings
"""Every procedure's settings type (a union, for type hints)."""


def scope_of(settings: Settings) -> str:
    """Where refusals are looked for in an answer (two-phase settings choose; windows read the whole answer)."""
    return getattr(settings, "refusal_scope", "all")


def procedure_for(settings: Settings) -> Procedure:
    """The procedure whose settings these are."""
    return next(p for p in PROCEDURES.values() if isinstance(settings, p.settings))
