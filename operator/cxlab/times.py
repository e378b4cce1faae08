"""Times as Kubernetes writes them: RFC 3339 in UTC ("2026-11-25T22:00:00Z"). The apiserver
writes a trailing Z, which datetime.fromisoformat reads only from Python 3.11 on and only as
part of the full grammar; every reader of such a time goes through here."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def parse_time(text: str) -> datetime:
    """A time the apiserver (or a status) wrote, timezone-aware."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def timestamp(moment: datetime) -> str:
    """As a status writes it: UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def whole_seconds(moment: datetime) -> datetime:
    """The moment as a status keeps it (timestamp's precision)."""
    return moment.astimezone(UTC).replace(microsecond=0)
