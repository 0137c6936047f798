"""Parsing of what humans type: Slurm time limits, memory sizes, expiries (pure)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from rsk.errors import UsageError

_MEM = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)
_EXPIRY = re.compile(r"^([0-9]{1,12})([smhdw])$")  # ASCII digits: an expiry may come from a web form


def parse_seconds(text: str) -> int:
    """A Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in seconds: the one reading of that format here."""
    t = text.strip()
    days = 0
    if "-" in t:
        d, _, t = t.partition("-")
        if not d.isdigit():
            raise _bad_time(text)
        days = int(d)
    parts = t.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        raise _bad_time(text)
    n = [int(p) for p in parts]
    if days:
        h, m, s = ([*n, 0, 0])[:3]
    elif len(n) == 1:
        h, m, s = 0, n[0], 0
    elif len(n) == 2:
        h, m, s = 0, n[0], n[1]
    else:
        h, m, s = n
    return days * 86400 + h * 3600 + m * 60 + s


def parse_time(text: str) -> int:
    """A Slurm time limit as whole minutes, rounded up."""
    minutes = -(-parse_seconds(text) // 60)
    if minutes < 1:
        raise UsageError(f"time limit {text!r} is zero", "give at least one minute, e.g. --time 10:00")
    return minutes


def _bad_time(text: str) -> UsageError:
    return UsageError(
        f"time limit {text!r} is not a Slurm time",
        "use minutes (30), H:M:S (2:00:00) or D-H:M:S (1-12:00:00)",
    )


def parse_mem(text: str) -> int:
    """A memory size per node (4096, 4096M, 16G, 1T) as whole MB."""
    m = _MEM.match(text.strip())
    if not m:
        raise UsageError(f"memory {text!r} is not a size", "use MB (4096) or a unit: 512M, 16G")
    n, unit = int(m.group(1)), m.group(2).upper()
    mb = {"K": n // 1024, "": n, "M": n, "G": n * 1024, "T": n * 1024 * 1024}[unit]
    if mb < 1:
        raise UsageError(f"memory {text!r} is less than 1 MB")
    return mb


def parse_expiry(text: str, at: datetime | None = None) -> datetime:
    """A duration from now (30m, 8h, 7d, 2w) or an ISO date/time (UTC when no zone is given)."""
    base = at or datetime.now(UTC)
    m = _EXPIRY.match(text.strip())
    try:
        if m:
            unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
            return base + timedelta(**{unit: int(m.group(1))})
        when = datetime.fromisoformat(text.strip())
    except (ValueError, OverflowError) as exc:  # not a date, or past the year 9999
        raise UsageError(
            f"expiry {text[:40]!r} is neither a duration nor a date", "use 8h, 7d or 2026-12-31T18:00"
        ) from exc
    return when if when.tzinfo else when.replace(tzinfo=UTC)
