"""What the sync and the asyncio APIs share besides the SQL: the errors and
the small records."""

import json
import traceback
from dataclasses import dataclass
from typing import Any, Optional
from uuid import UUID


class Parked(BaseException):
    """Raised inside a handler by sleep, wait_event or await_job when the job
    was handed back to wait (the SQL ended this attempt): the runtime ends
    the handler there and neither completes nor fails the job. A
    BaseException, so that a handler's `except Exception` does not catch it."""


class WaitTimedOut(Exception):
    """wait_event or await_job: the wait's timeout passed before the event
    was emitted or the job ended (the SQL's timed_out)."""


@dataclass(frozen=True)
class JobEnd:
    """How an awaited job ended: status success, exhausted, cancelled or
    expired (None for a job deleted before its end was seen)."""

    status: Optional[str]
    result: Any
    error: Optional[str]


def error_text(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def trace_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


class JobBase:
    """A claimed job as the handler sees it: id, attempt (the fencing token,
    which the library passes for you), queue and payload (text, as the
    jobs table keeps it; `data` is that text parsed as JSON)."""

    __slots__ = ("id", "attempt", "queue", "payload", "_data", "_steps", "_worker", "_slot", "leased_at")

    def __init__(self, row, worker, leased_at):
        self.id: UUID = row[0]
        self.attempt: int = row[1]
        self.queue: str = row[2]
        self.payload: Optional[str] = row[3]
        self._data = self._steps = self._slot = None
        self._worker = worker
        self.leased_at = leased_at

    @property
    def data(self) -> Any:
        """The payload parsed as JSON (None for no payload)."""
        if self._data is None and self.payload is not None:
            self._data = json.loads(self.payload)
        return self._data

    def __repr__(self):
        return f"<raquel_pg job {self.id} attempt {self.attempt} of queue {self.queue!r}>"
