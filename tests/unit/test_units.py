from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rsk.errors import UsageError
from rsk.request.units import parse_expiry, parse_mem, parse_time


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("30", 30), ("10:00", 10), ("10:01", 11), ("2:00:00", 120), ("1-00:00:00", 1440), ("1-2", 1560),
     ("1-2:30", 1590), ("0:0:1", 1)],
)  # fmt: skip
def test_parse_time_accepts_slurm_formats(text: str, minutes: int) -> None:
    assert parse_time(text) == minutes


@pytest.mark.parametrize("text", ["", "abc", "1:2:3:4", "-5", "0", "0:00", "x-1"])
def test_parse_time_refuses_garbage_with_a_hint(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_time(text)
    assert info.value.hint or "zero" in info.value.message


@pytest.mark.parametrize(("text", "mb"), [("4096", 4096), ("512M", 512), ("16G", 16384), ("1t", 1048576)])
def test_parse_mem(text: str, mb: int) -> None:
    assert parse_mem(text) == mb


@pytest.mark.parametrize("text", ["", "G", "1.5G", "12Q", "0", "100K"])
def test_parse_mem_refuses(text: str) -> None:
    with pytest.raises(UsageError):
        parse_mem(text)


def test_parse_expiry_durations_and_dates() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_expiry("8h", at) == at + timedelta(hours=8)
    assert parse_expiry("7d", at) == at + timedelta(days=7)
    assert parse_expiry("2026-12-31T18:00") == datetime(2026, 12, 31, 18, 0, tzinfo=UTC)
    with pytest.raises(UsageError):
        parse_expiry("soon")


@pytest.mark.parametrize("text", ["99999999999d", "9" * 5000 + "h", "\u0663h", "\u00b2d", "9999-12-31T23:59:59+99:00"])
def test_an_expiry_past_the_calendar_or_in_other_digits_is_a_usage_error(text: str) -> None:
    """Typed at `rsk approve --expires` or in the page's form: a usage error, never a traceback."""
    with pytest.raises(UsageError) as exc:
        parse_expiry(text, datetime(2026, 1, 1, tzinfo=UTC))
    assert len(exc.value.message) < 120
