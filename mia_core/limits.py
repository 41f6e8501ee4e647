"""Bounds on the work one dashboard request may cause, stated once, so one visitor cannot starve the others.

What a file may cost to read (sizes, zip entries, inflated bytes) is bounded in `inputs.limits`; the bounds here
are on a request: the text scored at once, the uploads of one set, the background audits running together, the
tokens drawn in one heatmap, and which run ids a link may name. docs/security.md lists them all with where each is
enforced. The command line, run by the machine's own user, is not held to the request bounds.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

#: Characters scored in one Explore, Long-text or Unlearning request (all its texts together): 200,000, about
#: 50,000 tokens (≈ 4 characters a token in English) or a 100-page text. The model work grows with it: ~5 min at
#: the 161 tok/s measured on 2 CPU cores for long texts, seconds on a GPU. Longer texts: `mia score`,
#: `mia audit-online`, `mia audit-unlearning`, or the Book audit (snippets, run in the background).
MAX_REQUEST_CHARS = 200_000
#: Tokens drawn in one heatmap: 2,000, ≈ 0.55 MB of HTML at ~275 bytes a token (a 50,000-token text drawn whole
#: was 10.5 MB, a 50 M-character book ~2.5 GB); a longer text is shown a page at a time, coloured on the whole text.
MAX_HEATMAP_TOKENS = 2_000
#: Files in one upload set (one uploader of the Book audit or the Unlearning audit): 100 (a zip of books holds
#: more; its entries are bounded by `inputs.limits.MAX_ZIP_ENTRIES`). Streamlit holds uploads in memory.
MAX_UPLOAD_FILES = 100
#: Bytes of one upload set, its files together: 200 MB (each file is also held to `server.maxUploadSize`, 20 MB).
MAX_UPLOAD_SET_BYTES = 200_000_000
#: Bytes of uploads one session keeps saved at once, its upload sets together (the Book audit's members, non-members
#: and books): 400 MB. Streamlit holds each uploaded file in the server's memory until the visitor removes it, and
#: the page keeps a copy on disk; a set that would take the session over this is refused until others are removed.
MAX_SESSION_UPLOAD_BYTES = 400_000_000
#: Background book audits scoring at once in one dashboard server: 1. They share one model and device, so two
#: at once only halve each other's speed and double the memory of the batches; a second one waits for the slot.
MAX_BACKGROUND_JOBS = 1
#: Most a chat API extraction started from the dashboard may spend: $50 or 10 M tokens (its budget is required and
#: held to these; the CLI's `--budget` has no upper bound). A visitor spends the operator's key when the operator
#: allows keys at all (docs: Security and limits).
MAX_PAGE_BUDGET_DOLLARS = 50.0
MAX_PAGE_BUDGET_TOKENS = 10_000_000
#: What a run id may be (`?run=` links, `--job-id`): a letter or digit, then up to 63 letters, digits, `.`, `_`
#: or `-`. Derived ids are 12 hex digits (`audit.jobs`).
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class RequestTooLarge(ValueError):
    """A request over one of the bounds above; the message says the bound and what to do instead."""


def check_request_chars(texts: Iterable[str], what: str = "this request") -> None:
    """Refuse texts whose characters sum over MAX_REQUEST_CHARS (before any model work)."""
    total = sum(len(t) for t in texts)
    if total > MAX_REQUEST_CHARS:
        raise RequestTooLarge(
            f"{what} has {total:,} characters, over the {MAX_REQUEST_CHARS:,} scored at once in the dashboard: "
            "shorten it, or score it from the command line (mia score, mia audit-online, mia audit-unlearning)")


def check_upload_set(sizes: Sequence[int], what: str = "this upload") -> None:
    """Refuse more than MAX_UPLOAD_FILES files, or more than MAX_UPLOAD_SET_BYTES bytes, in one upload set."""
    if len(sizes) > MAX_UPLOAD_FILES:
        raise RequestTooLarge(f"{what} has {len(sizes):,} files, over the {MAX_UPLOAD_FILES:,} allowed at once: "
                              "put the books in a .zip, or run `mia audit-books` on a folder")
    if sum(sizes) > MAX_UPLOAD_SET_BYTES:
        raise RequestTooLarge(f"{what} holds {sum(sizes) / 1e6:,.0f} MB, over the {MAX_UPLOAD_SET_BYTES / 1e6:,.0f} "
                              "MB allowed at once: run `mia audit-books` on a folder instead")


def check_session_uploads(held: int, adding: int) -> None:
    """Refuse an upload set of `adding` bytes when the session already keeps `held` and both pass
    MAX_SESSION_UPLOAD_BYTES."""
    if held + adding > MAX_SESSION_UPLOAD_BYTES:
        raise RequestTooLarge(f"this session already keeps {held / 1e6:,.0f} MB of uploads; with these "
                              f"{adding / 1e6:,.0f} MB it would pass the {MAX_SESSION_UPLOAD_BYTES / 1e6:,.0f} MB one "
                              "session may keep: remove uploads you no longer need, or run `mia audit-books` on a folder")


def is_run_id(value: object) -> bool:
    """Whether `value` is a string a run id may be (RUN_ID_PATTERN)."""
    return isinstance(value, str) and RUN_ID_PATTERN.fullmatch(value) is not None


def heatmap_pages(n_tokens: int, size: int = MAX_HEATMAP_TOKENS) -> list[tuple[int, int]]:
    """[start, stop) token ranges of at most `size` tokens covering 0..n_tokens (one empty page for no tokens)."""
    if size < 1:
        raise ValueError(f"size must be at least 1 (got {size})")
    return [(start, min(start + size, n_tokens)) for start in range(0, n_tokens, size)] or [(0, 0)]


# --- Model work of dashboard requests: one line per server, a bound on what one request may cost (issue 31) ---
#: Page requests computing with the model at once in one dashboard server: 1. They share one model and device, so
#: two at once only halve each other's speed (four visitors scoring 16k tokens each on 2 CPU cores all ran past 15
#: minutes); the others wait in a first-in, first-out line, each told its place (`ui.model_queue`). Background book
#: audits are not in that line: they have their own slot (MAX_BACKGROUND_JOBS), so a page never waits for an audit.
MODEL_WORK_SLOTS = 1
#: Token-passes one page request may cost when the model runs on the CPU: 50,000 (its tokens × the model passes of
#: its methods, the statistics pass counted once): ≈ 5 min at the 161 tok/s measured for the 135M demo model on 2
#: CPU cores, the statistics of the longest text a page takes (MAX_REQUEST_CHARS, ≈ 50,000 tokens); the fourth
#: visitor in line waits at most ≈ 15 min, not forever. Larger requests: the command line (`mia`).
MAX_REQUEST_TOKEN_PASSES_CPU = 50_000
#: The same bound when the model runs on a GPU: 1,000,000 token-passes (≈ 2 min at ~10k tok/s for a 1B model).
MAX_REQUEST_TOKEN_PASSES_GPU = 1_000_000
#: Seconds a request's place in line is kept after its session's script was rerun (the rerun claims it back), and
#: the longest a page waits between two looks at whether its session still exists: work whose browser session
#: ended leaves the line, or stops at the next batch of the model, well within 10 s.
MODEL_QUEUE_GRACE_S = 3.0


def token_pass_bound(device_type: str) -> int:
    """The token-passes one request may cost on a device of this type ("cpu", "cuda", "mps": GPUs share a bound)."""
    return MAX_REQUEST_TOKEN_PASSES_CPU if device_type == "cpu" else MAX_REQUEST_TOKEN_PASSES_GPU


def bound_place(device_type: str) -> str:
    """Where a request's bound applies, in words: this server's CPU or GPU, or a served model's server, whose device
    it does not report (so it is named as what it is, never guessed)."""
    if device_type == "served":
        return "the model's server (its device is not reported)"
    return f"this server's {'CPU' if device_type == 'cpu' else 'GPU'}"


def check_request_cost(token_passes: int, device_type: str, what: str = "This request") -> None:
    """Refuse a request whose estimated token-passes exceed the bound for the model's device (before it queues)."""
    bound = token_pass_bound(device_type)
    if token_passes > bound:
        raise RequestTooLarge(
            f"{what} would cost ≈ {token_passes:,} token-passes (tokens × model passes), over the {bound:,} one request "
            f"may cost on this server's {'CPU' if device_type == 'cpu' else 'GPU'}: shorten the text, choose fewer "
            "methods that run the model again, or run it from the command line (mia score, mia eval)")
