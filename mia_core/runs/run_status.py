"""What a stored run is shown as: its plan compared with a new one, "running" runs whose process is gone, its progress.

Showing never writes: a run stored as "running" whose scoring process has died is *shown* as
interrupted (with how to resume it), and the store keeps what it has.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd

from .store_db import now

#: A "running" run whose heartbeat (one per committed batch) is older than this is shown as interrupted even when
#: its pid cannot be checked (another host) or looks alive (a reused pid): 1 h, far above one batch's time.
STALE_HEARTBEAT_S = 3600.0
HOST = socket.gethostname()


@dataclass(frozen=True)
class RunProgress:
    """A run's progress as its store records it, batch by batch (timestamps: UTC, no time zone).

    scored_before : snippets already stored when the current scoring session started (a resumed run).
    started_at : when the current (or last) scoring session started; None if the run was never scored.
    last_batch_at : when the newest batch was committed; None before the first.
    """

    status: str
    scored: int
    planned: int
    scored_before: int
    started_at: datetime | None
    last_batch_at: datetime | None


class PlanMismatch(ValueError):
    """A named run exists with another plan (other texts, settings or model)."""


def plan_difference(run_id: str, stored: dict, new: dict) -> str:
    """What differs between a stored plan and a new one, in words (the error of a reused job id)."""
    parts = []
    for key, value in stored.items():
        if new.get(key) == value:
            continue
        if isinstance(value, dict) and isinstance(new.get(key), dict):
            parts += [f"{k} {value.get(k)} → {new[key].get(k)}" for k in sorted(set(value) | set(new[key]))
                      if value.get(k) != new[key].get(k)]
        else:
            parts.append(key)
    return (f"job {run_id} exists with another plan (changed: {'; '.join(parts) or 'settings'}); its stored scores "
            "would not describe these inputs. Use another --job-id, or leave it out to derive one")


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except (OSError, ValueError, OverflowError):
        return False
    return True


def shown_status(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with each "running" run whose process is gone shown as interrupted (a copy; nothing is written)."""
    runs = runs.copy()
    moment = now()
    for i, row in runs[runs["status"] == "running"].iterrows():
        gone_here = row["host"] == HOST and not pd.isna(row["pid"]) and not pid_alive(int(row["pid"]))
        silent = pd.isna(row["heartbeat"]) or moment - row["heartbeat"] > timedelta(seconds=STALE_HEARTBEAT_S)
        if gone_here or silent:
            pid = "?" if pd.isna(row["pid"]) else int(row["pid"])
            runs.at[i, "status"] = "interrupted"
            runs.at[i, "message"] = (
                f"its scoring process (pid {pid} on {row['host']}) stopped without finishing; stored scores are kept. "
                f"Resume with the same `mia audit-books …` command plus --job-id {row['run_id']}, or 'Resume scoring here' "
                "on the Book audit page")
    return runs


def live_messages(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` (with n_scored, n_snippets) with each still-running run's message counted now: the message stored when
    its scoring started ("0 of 36 snippets scored") would otherwise stand beside a growing n_scored."""
    runs = runs.copy()
    running = runs["status"] == "running"
    runs.loc[running, "message"] = [f"{int(s):,} of {int(n):,} snippets scored"
                                    for s, n in zip(runs.loc[running, "n_scored"], runs.loc[running, "n_snippets"])]
    return runs
