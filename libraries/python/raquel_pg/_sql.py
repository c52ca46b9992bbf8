"""The SQL the sync and the asyncio APIs share: every statement is one of
raquel's verbs, built here once (no table or protocol of the library's own)."""

import datetime
import json
from typing import Any, Iterable, Optional, Sequence, Tuple

from psycopg.types.json import Jsonb

# The columns a claim returns to the runtime, in this order.
JOB_COLUMNS = "id, attempts, queue, payload"

# rq_enqueue's options, in its argument order, with the SQL type each is sent as.
ENQUEUE_OPTIONS = (
    ("at", "timestamptz"),
    ("delay", "interval"),
    ("max_age", "interval"),
    ("max_retry_count", "integer"),
    ("min_retry_delay", "interval"),
    ("max_retry_delay", "interval"),
    ("backoff_base", "interval"),
    ("priority", "integer"),
    ("key", "text"),
    ("group_key", "text"),
    ("after", "uuid[]"),
    ("key_period", "interval"),
)
# rq_enqueue_batch takes the same, with keys and group_keys one per payload and no key_period.
BATCH_OPTIONS = tuple((n, t) for n, t in ENQUEUE_OPTIONS if n not in ("key", "group_key", "key_period")) + (
    ("keys", "text[]"),
    ("group_keys", "text[]"),
)


def interval(value: Any) -> Optional[datetime.timedelta]:
    """Seconds (int or float) or a timedelta, as the timedelta psycopg sends as an interval."""
    if value is None or isinstance(value, datetime.timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.timedelta(seconds=value)
    raise TypeError(f"a duration is seconds (int or float) or a datetime.timedelta, not {type(value).__name__}")


def payload_param(payload: Any) -> Tuple[str, Any]:
    """A str is sent as text (stored as is); anything else as jsonb (stored as its JSON text)."""
    if payload is None or isinstance(payload, str):
        return "text", payload
    return "jsonb", Jsonb(payload)


def _options(allowed, options) -> Tuple[str, list]:
    names = dict(allowed)
    parts, params = [], []
    for name, value in options.items():
        if name not in names:
            known = ", ".join(names)
            raise TypeError(f"unknown enqueue option {name!r} (the options are {known})")
        if value is None:
            continue  # the SQL default
        if names[name] == "interval":
            value = interval(value)
        elif names[name] == "uuid[]":
            value = [str(v) for v in value]
        parts.append(f", {name} => %s::{names[name]}")
        params.append(value)
    return "".join(parts), params


def enqueue(queue: str, payload: Any, options: dict) -> Tuple[str, list]:
    kind, value = payload_param(payload)
    opts, params = _options(ENQUEUE_OPTIONS, options)
    return (f"SELECT id FROM rq_enqueue(%s::text, %s::{kind}{opts})", [queue, value] + params)


def enqueue_batch(queue: str, payloads: Sequence[Any], options: dict) -> Tuple[str, list]:
    payloads = list(payloads)
    if payloads and all(p is None or isinstance(p, str) for p in payloads):
        kind, values = "text[]", payloads
    else:
        kind, values = "jsonb[]", [None if p is None else Jsonb(p) for p in payloads]
    opts, params = _options(BATCH_OPTIONS, options)
    return (f"SELECT id FROM rq_enqueue_batch(%s::text, %s::{kind}{opts})", [queue, values] + params)


def claim(queues, worker, batch, lease, wait) -> Tuple[str, list]:
    return (
        f"SELECT {JOB_COLUMNS} FROM rq_claim(%s::text[], %s::text, %s::int, %s::interval, %s::interval)",
        [queues, worker, batch, lease, wait],
    )


def results_param(results: Sequence[Any]):
    if all(r is None for r in results):
        return None
    return [None if r is None else Jsonb(r) for r in results]


def complete_batch_and_claim(ids, attempts, results, queues, worker, batch, lease) -> Tuple[str, list]:
    # wait => 0: a completion is never held up behind a waiting claim.
    return (
        f"SELECT {JOB_COLUMNS} FROM rq_complete_batch_and_claim(%s::uuid[], %s::int[], %s::text[], %s::text, %s::int,"
        " %s::interval, '0'::interval, %s::jsonb[])",
        [ids, attempts, queues, worker, batch, lease, results_param(results)],
    )


def complete_batch(ids, attempts, results) -> Tuple[str, list]:
    return ("SELECT count(*) FROM rq_complete_batch(%s::uuid[], %s::int[], %s::jsonb[])",
            [ids, attempts, results_param(results)])


def complete(job_id, attempt, result) -> Tuple[str, list]:
    return ("SELECT status FROM rq_complete(%s::uuid, %s::int, %s::jsonb)",
            [job_id, attempt, None if result is None else Jsonb(result)])


FAIL = "SELECT status FROM rq_fail(%s::uuid, %s::int, %s::text, %s::text)"
REJECT = "SELECT status FROM rq_reject(%s::uuid, %s::int)"
EXTEND = "SELECT lease_expires_at FROM rq_extend(%s::uuid, %s::int, %s::interval)"
STEPS = "SELECT name, result FROM job_steps WHERE job_id = %s::uuid AND kind = 'step'"
STEP = "SELECT name FROM rq_step(%s::uuid, %s::int, %s::text, %s::jsonb)"
SLEEP = "SELECT rq_sleep(%s::uuid, %s::int, %s::text, at => %s::timestamptz, delay => %s::interval)"
WAIT_EVENT = "SELECT parked, payload, timed_out FROM rq_wait_event(%s::uuid, %s::int, %s::text, %s::text, %s::interval)"
WAIT_JOB = ("SELECT parked, status, result, error, timed_out"
            " FROM rq_wait_job(%s::uuid, %s::int, %s::text, %s::uuid, %s::interval)")
EMIT = "SELECT rq_emit(%s::text, %s::jsonb, %s::interval)"
AWAIT = "SELECT status, result, error FROM rq_await(%s::uuid, %s::interval)"


def emit(event: str, payload: Any, keep: Any) -> Tuple[str, list]:
    return EMIT, [event, None if payload is None else Jsonb(payload), interval(keep)]
