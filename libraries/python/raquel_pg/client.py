"""Producing jobs with psycopg 3 (sync): each call is one raquel verb on the
connection given, so it joins the caller's open transaction (a rollback
takes the job with it); on an autocommit connection it commits at once."""

import datetime
from typing import Any, Iterable, List, Optional, Sequence, Union
from uuid import UUID

import psycopg

from . import _sql
from ._common import JobEnd

Duration = Union[int, float, datetime.timedelta]


def enqueue(
    conn: psycopg.Connection,
    queue: str,
    payload: Any = None,
    *,
    at: Optional[datetime.datetime] = None,
    delay: Optional[Duration] = None,
    max_age: Optional[Duration] = None,
    max_retry_count: Optional[int] = None,
    min_retry_delay: Optional[Duration] = None,
    max_retry_delay: Optional[Duration] = None,
    backoff_base: Optional[Duration] = None,
    priority: Optional[int] = None,
    key: Optional[str] = None,
    group_key: Optional[str] = None,
    after: Optional[Iterable[Union[UUID, str]]] = None,
    key_period: Optional[Duration] = None,
) -> UUID:
    """Enqueues one job (rq_enqueue) and returns its id. A str payload is
    stored as is, anything else as JSON. Durations are seconds or
    timedeltas; None leaves the SQL default. With a key, enqueueing the key
    again while its job is unfinished returns that job's id."""
    sql, params = _sql.enqueue(queue, payload, dict(
        at=at, delay=delay, max_age=max_age, max_retry_count=max_retry_count, min_retry_delay=min_retry_delay,
        max_retry_delay=max_retry_delay, backoff_base=backoff_base, priority=priority, key=key,
        group_key=group_key, after=after, key_period=key_period))
    return conn.execute(sql, params).fetchone()[0]


def enqueue_batch(
    conn: psycopg.Connection,
    queue: str,
    payloads: Sequence[Any],
    *,
    at: Optional[datetime.datetime] = None,
    delay: Optional[Duration] = None,
    max_age: Optional[Duration] = None,
    max_retry_count: Optional[int] = None,
    min_retry_delay: Optional[Duration] = None,
    max_retry_delay: Optional[Duration] = None,
    backoff_base: Optional[Duration] = None,
    priority: Optional[int] = None,
    keys: Optional[Sequence[Optional[str]]] = None,
    group_keys: Optional[Sequence[Optional[str]]] = None,
    after: Optional[Iterable[Union[UUID, str]]] = None,
) -> List[UUID]:
    """Enqueues one job per payload in one statement (rq_enqueue_batch, 1 to
    100 000 jobs) and returns their ids in the payloads' order. All str:
    stored as text; otherwise each as JSON. keys and group_keys: one per
    payload."""
    sql, params = _sql.enqueue_batch(queue, payloads, dict(
        at=at, delay=delay, max_age=max_age, max_retry_count=max_retry_count, min_retry_delay=min_retry_delay,
        max_retry_delay=max_retry_delay, backoff_base=backoff_base, priority=priority, keys=keys,
        group_keys=group_keys, after=after))
    return [row[0] for row in conn.execute(sql, params).fetchall()]


def emit(conn: psycopg.Connection, event: str, payload: Any = None, *, keep: Optional[Duration] = None) -> Optional[int]:
    """Emits an event (rq_emit): the jobs waiting for it resume with its
    payload. Returns how many parked jobs it resumed."""
    sql, params = _sql.emit(event, payload, keep)
    return conn.execute(sql, params).fetchone()[0]


def wait_result(conn: psycopg.Connection, job_id: Union[UUID, str], timeout: Duration = 30) -> JobEnd:
    """Waits (rq_await, woken by the ending commit) until the job has ended
    or the timeout passed, and returns its status, result and error as they
    then are. Needs a connection outside a transaction that enqueued it."""
    row = conn.execute(_sql.AWAIT, [job_id, _sql.interval(timeout)]).fetchone()
    return JobEnd(*row) if row is not None else JobEnd(None, None, None)
