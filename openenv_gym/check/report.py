"""The outcome of a check run: :class:`Status`, :class:`CheckResult`, :class:`CheckReport`."""

from __future__ import annotations

import enum
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SEVERITY", "CheckReport", "CheckResult", "Status", "brief"]

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlevel = 3


def brief(value: Any) -> str:
    """``repr(value)``, cut short (long strings, deep nesting)."""
    return _REPR.repr(value)


class Status(enum.StrEnum):
    """Outcome of one check."""

    PASS = "pass"  # the server does what the protocol says
    WARN = "warn"  # allowed, but worth knowing (or the check could not be completed)
    FAIL = "fail"  # the server breaks the protocol, or the check could not run
    SKIP = "skip"  # not applicable (e.g. the batched protocol is not offered)


SEVERITY = {Status.SKIP: 0, Status.PASS: 1, Status.WARN: 2, Status.FAIL: 3}
"""How bad each status is: a check's status is the worst of its findings."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one check.

    Attributes:
        name: The check's name (one of :data:`CHECK_NAMES`).
        status: pass, warn, fail or skip.
        detail: What was found, problems first.
        info: Facts worth a machine's attention (``capacity``, ``action``, ...), JSON values.
    """

    name: str
    status: Status
    detail: str
    info: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "info": dict(self.info),
        }


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Every check's result, in order.

    Attributes:
        url: The server checked.
        results: One :class:`CheckResult` per check, in the order they ran.
    """

    url: str
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """Whether no check failed (warnings and skips are fine)."""
        return all(r.status is not Status.FAIL for r in self.results)

    def counts(self) -> dict[str, int]:
        """How many checks ended in each status."""
        return {s.value: sum(r.status is s for r in self.results) for s in Status}

    def __getitem__(self, name: str) -> CheckResult:
        """The result of the check called ``name``."""
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (what ``openenv-gym check --json`` prints)."""
        return {
            "url": self.url,
            "ok": self.ok,
            "counts": self.counts(),
            "checks": [r.to_dict() for r in self.results],
        }

    def render(self) -> str:
        """The report as text, one line per check, then a summary line.

        >>> report = CheckReport("http://h:1", (CheckResult("health", Status.PASS, "200"),))
        >>> print(report.render())
        openenv-gym check http://h:1
          PASS  health    200
        OK: 1 passed, 0 warnings, 0 failed, 0 skipped
        """
        width = max([8, *(len(r.name) for r in self.results)])
        lines = [f"openenv-gym check {self.url}"]
        lines += [
            f"  {r.status.value.upper():<4}  {r.name:<{width}}  {r.detail}".rstrip()
            for r in self.results
        ]
        c = self.counts()
        lines.append(
            f"{'OK' if self.ok else 'FAILED'}: {c['pass']} passed, {c['warn']} "
            f"warning{'' if c['warn'] == 1 else 's'}, {c['fail']} failed, {c['skip']} skipped"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()
