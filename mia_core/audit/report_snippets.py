"""The audit report's top snippets: each flagged book's highest-scoring snippets, as token heatmaps where the
model is at hand and the method's token scores come from the statistics alone, else as escaped text."""
from __future__ import annotations

from ..api import MethodSpec
from ..heatmap import heatmap_html, make_panel
from ..methods import get_method
from ..model.language_model import LanguageModel
from ..names import html_text
from ..scoring import score
from .jobs import AuditResult, AuditSettings

#: Snippets shown per flagged book, highest score first.
TOP_SNIPPETS = 3


def snippets_section(result: AuditResult, flagged: list[str], lm: LanguageModel, printed: bool = False) -> str:
    """The top snippets of every flagged book; with none flagged, of the top-ranked book, for inspection (`printed`:
    for paper, no word of hovering)."""
    spec = get_method(result.settings.method)
    shown = flagged or list(result.books["book"][:1])
    lead = ("The highest-scoring snippets of each flagged book" if flagged else
            "No book was flagged. For inspection, the highest-scoring snippets of the top-ranked book")
    hover = "" if printed else "; hover for log-probabilities"
    parts = ["<h2>Top snippets</h2><p class='note'>" + lead
             + (f", coloured by the per-token {html_text(spec.label)} scores (outlined: tokens in the sequence score"
                f"{hover})." if lm is not None and has_heatmap(spec) else ".") + "</p>"]
    audit = result.snippets[result.snippets["role"] == "audit"]
    for book in shown:
        top = audit[audit["book"] == book].nlargest(TOP_SNIPPETS, "score")
        texts = result.texts(top["snippet_id"])  # only the snippets shown are read with their texts
        parts.append(f"<h3>{html_text(book)}</h3>")
        for row in top.itertuples():
            body = snippet_body(texts[row.snippet_id], result, lm, f"heatmap-{row.snippet_id}", printed)
            parts.append(f"<details open><summary>snippet {row.position} — score {row.score:.4g}</summary>{body}</details>")
    return "".join(parts)


def snippet_body(text: str, result: AuditResult, lm: LanguageModel, element_id: str, printed: bool = False) -> str:
    """A token heatmap of the snippet when the model is at hand and the method has one, else its text."""
    heatmap = snippet_heatmap(lm, text, result.settings, element_id, printed) if lm is not None else None
    return heatmap if heatmap is not None else f"<div style='white-space:pre-wrap'>{html_text(text)}</div>"


def snippet_heatmap(lm: LanguageModel, text: str, settings: AuditSettings, element_id: str,
                    printed: bool = False) -> str | None:
    """The snippet's token heatmap from the target's (cached) statistics; None when the method has no such view."""
    spec = get_method(settings.method)
    if not has_heatmap(spec):
        return None
    stats = lm.token_stats([text], bos=settings.bos, long_text="truncate")[0]
    params = {k: v for k, v in settings.params.items() if k in spec.param_names}
    s = score(spec.name, stats, **params)
    safe_id = "".join(c if c.isalnum() or c in "-_" else "-" for c in element_id)
    decode = lambda i: lm.tokenizer.decode([i])  # noqa: E731
    panel = make_panel(spec.name, s, scale="text")  # a snippet's own range: its contrasts, drawn with the plain legend
    return heatmap_html(stats, s.token_scores, s.selected, scale=panel.scale, member_high=panel.member_high,
                        decode=decode, element_id=safe_id, printed=printed)


def has_heatmap(spec: MethodSpec) -> bool:
    """Whether the method's token scores come from the target's statistics alone (lowercase, dc_pdd… need more)."""
    return spec.token_level and spec.stats_only
