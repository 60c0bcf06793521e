"""The result of `chatmem doctor`: one line per check, and its exit code.

Statuses: `ok`; `warn` (works, but an operator should act: a loose config file, a
backlog, a look-alike scope); `fail` (something will not work: the database, the model);
`skip` (not checked: not configured, or needs `--online`). The exit code is 0 when
nothing is `warn` or `fail`, else 1; 2 is left to what stops the doctor itself (bad
arguments), as for every command. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

EXIT_ALL_OK = 0
EXIT_PROBLEMS = 1


class CheckStatus(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Check:
    name: str
    status: CheckStatus
    detail: str

    def line(self) -> str:
        return f"{self.status.value:<4}  {self.name}: {self.detail}"

    def as_json(self) -> dict[str, Any]:
        return {"check": self.name, "status": self.status.value, "detail": self.detail}


def ok(name: str, detail: str) -> Check:
    return Check(name, CheckStatus.OK, detail)


def warn(name: str, detail: str) -> Check:
    return Check(name, CheckStatus.WARN, detail)


def fail(name: str, detail: str) -> Check:
    return Check(name, CheckStatus.FAIL, detail)


def skip(name: str, detail: str) -> Check:
    return Check(name, CheckStatus.SKIP, detail)


def exit_code(checks: Iterable[Check]) -> int:
    bad = {CheckStatus.WARN, CheckStatus.FAIL}
    return EXIT_PROBLEMS if any(c.status in bad for c in checks) else EXIT_ALL_OK


def without_secrets(checks: Sequence[Check], secrets: Iterable[str]) -> list[Check]:
    """Every detail with each secret replaced by `<secret>`: a check's detail may quote a
    library's error, and a library may quote what it was given."""
    ordered = sorted({s for s in secrets if s}, key=len, reverse=True)

    def hidden(text: str) -> str:
        for secret in ordered:
            text = text.replace(secret, "<secret>")
        return text

    return [Check(c.name, c.status, hidden(c.detail)) for c in checks]


def summary(checks: Sequence[Check]) -> str:
    counts = {s: sum(1 for c in checks if c.status is s) for s in CheckStatus}
    shown = ", ".join(f"{n} {s.value}" for s, n in counts.items() if n)
    return f"doctor: {shown}"
