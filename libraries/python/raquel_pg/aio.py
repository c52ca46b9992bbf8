"""The asyncio API (psycopg 3 AsyncConnection): the same SQL and the same
runtime as raquel_pg's sync one, with async handlers as tasks.

    from raquel_pg import aio
    worker = aio.Worker(conninfo, {"emails": send})   # async def send(job): …
    asyncio.run(worker.run())
"""

import asyncio
import datetime
import inspect
import json
import logging
import os
import signal
import socket
import time
from typing import Any, Awaitable, Callable, Dict, Iterable, Optional, Sequence, Union
from uuid import UUID

import psycopg

from . import _sql
from ._common import JobBase, JobEnd, Parked, WaitTimedOut, error_text, trace_text

log = logging.getLogger("raquel_pg")
Duration = Union[int, float, datetime.timedelta]


# -- producing --------------------------------------------------------------

async def enqueue(conn: psycopg.AsyncConnection, queue: str, payload: Any = None, **options) -> UUID:
    """As raquel_pg.enqueue (the same keyword options), on an AsyncConnection."""
    sql, params = _sql.enqueue(queue, payload, options)
    cur = await conn.execute(sql, params)
    return (await cur.fetchone())[0]


async def enqueue_batch(conn: psycopg.AsyncConnection, queue: str, payloads: Sequence[Any], **options):
    """As raquel_pg.enqueue_batch, on an AsyncConnection."""
    sql, params = _sql.enqueue_batch(queue, payloads, options)
    cur = await conn.execute(sql, params)
    return [row[0] for row in await cur.fetchall()]


async def emit(conn: psycopg.AsyncConnection, event: str, payload: Any = None, *, keep: Optional[Duration] = None):
    sql, params = _sql.emit(event, payload, keep)
    cur = await conn.execute(sql, params)
    return (await cur.fetchone())[0]


async def wait_result(conn: psycopg.AsyncConnection, job_id, timeout: Duration = 30) -> JobEnd:
    cur = await conn.execute(_sql.AWAIT, [job_id, _sql.interval(timeout)])
    row = await cur.fetchone()
    return JobEnd(*row) if row is not None else JobEnd(None, None, None)


async def _one(conn, sql, params):
    cur = await conn.execute(sql, params)
    return await cur.fetchone()


# -- the job's durable context ----------------------------------------------

class Job(JobBase):
    """As raquel_pg.Job, with awaitable verbs."""

    __slots__ = ()

    async def connection(self) -> psycopg.AsyncConnection:
        """This handler's own AsyncConnection (autocommit), opened on first use."""
        return await self._slot.connection()

    async def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """As raquel_pg.Job.step; fn may be sync or async."""
        conn = await self.connection()
        if self._steps is None:
            cur = await conn.execute(_sql.STEPS, [self.id])
            self._steps = dict(await cur.fetchall())
        if name in self._steps:
            return self._steps[name]
        async with conn.transaction():
            result = fn()
            if inspect.isawaitable(result):
                result = await result
            await conn.execute(_sql.STEP, [self.id, self.attempt, name, _sql.Jsonb(result)])
        self._steps[name] = result
        return result

    async def sleep(self, name: str, duration: Optional[Duration] = None, *, at: Optional[datetime.datetime] = None):
        row = await _one(await self.connection(), _sql.SLEEP, [self.id, self.attempt, name, at, _sql.interval(duration)])
        if row[0]:
            raise Parked()

    async def wait_event(self, name: str, event: str, timeout: Optional[Duration] = None) -> Any:
        parked, payload, timed_out = await _one(
            await self.connection(), _sql.WAIT_EVENT, [self.id, self.attempt, name, event, _sql.interval(timeout)])
        if parked:
            raise Parked()
        if timed_out:
            raise WaitTimedOut(f"event {event!r} (wait {name!r}) was not emitted within its timeout")
        return payload

    async def await_job(self, job_id, *, name: Optional[str] = None, timeout: Optional[Duration] = None) -> JobEnd:
        parked, status, result, error, timed_out = await _one(
            await self.connection(), _sql.WAIT_JOB,
            [self.id, self.attempt, name or f"await:{job_id}", job_id, _sql.interval(timeout)])
        if parked:
            raise Parked()
        if timed_out:
            raise WaitTimedOut(f"job {job_id} did not end within the wait's timeout")
        return JobEnd(status, result, error)

    async def enqueue(self, queue: str, payload: Any = None, **options) -> UUID:
        return await enqueue(await self.connection(), queue, payload, **options)

    async def emit(self, event: str, payload: Any = None, **options):
        return await emit(await self.connection(), event, payload, **options)


class _Slot:
    def __init__(self, worker):
        self.worker, self.conn = worker, None

    async def connection(self):
        if self.conn is None or self.conn.closed:
            self.conn = await self.worker._connect()
        return self.conn

    async def close(self):
        if self.conn is not None:
            await self.conn.close()


# -- the runtime --------------------------------------------------------------

class Worker:
    """As raquel_pg.Worker (the same options), with async handlers run as
    `concurrency` tasks on one event loop. run() handles SIGTERM and SIGINT
    on the running loop."""

    def __init__(self, conninfo: str, handlers: Optional[Dict[str, Callable[[Job], Awaitable[Any]]]] = None, *,
                 concurrency: int = 10, lease: float = 30.0, claim_wait: float = 5.0,
                 max_completion_delay: float = 0.01, shutdown_timeout: float = 30.0, name: Optional[str] = None,
                 on_job=None, connect_kwargs: Optional[dict] = None):
        if concurrency < 1:
            raise ValueError(f"concurrency is at least 1, not {concurrency}")
        if lease <= 0 or claim_wait < 0 or max_completion_delay < 0 or shutdown_timeout < 0:
            raise ValueError("lease is positive; claim_wait, max_completion_delay and shutdown_timeout are >= 0")
        self.conninfo, self.handlers = conninfo, dict(handlers or {})
        self.concurrency, self.lease, self.claim_wait = concurrency, lease, claim_wait
        self.max_completion_delay, self.shutdown_timeout = max_completion_delay, shutdown_timeout
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.on_job, self.connect_kwargs = on_job, dict(connect_kwargs or {})

    def handler(self, queue: str):
        def register(fn):
            self.handlers[queue] = fn
            return fn
        return register

    async def _connect(self):
        return await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True, **self.connect_kwargs)

    async def _claim_connection(self):
        conn = await self._connect()
        # As the sync worker's: a dead worker's waiting claim is cut short by the server.
        try:
            await conn.execute("SET client_connection_check_interval = '1s'")
        except psycopg.Error:
            pass
        return conn

    def stop(self):
        """Stops claiming and shuts down gracefully (as SIGTERM does)."""
        if not hasattr(self, "_stopping"):
            raise RuntimeError("this worker is not running: stop() stops a run() in progress")
        self._stopping.set()
        self._changed()
        if self._claiming and self._claim_conn is not None and not self._claim_conn.closed:
            try:
                self._claim_conn.cancel()  # a cancelled claim claims nothing
            except psycopg.Error:
                pass

    def _changed(self):
        self._cond_event.set()

    async def _wait_change(self, timeout=None):
        self._cond_event.clear()
        try:
            await asyncio.wait_for(self._cond_event.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def run(self, install_signal_handlers: bool = True) -> None:
        if not self.handlers:
            raise ValueError("a worker needs at least one handler (Worker(conninfo, {queue: handler}))")
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._cond_event = asyncio.Event()
        self._in_hand, self._pending, self._pending_since = 0, [], 0.0
        self._running, self._held = {}, {}
        self._jobs: asyncio.Queue = asyncio.Queue()
        self._claiming = self._sending = False
        self._sending_ids = set()
        self._claim_conn = None
        self._closed = False
        self._queues = list(self.handlers)
        self._lease = datetime.timedelta(seconds=self.lease)
        if install_signal_handlers:
            for signum in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(signum, self.stop)
                except (NotImplementedError, RuntimeError):
                    pass
        self._claim_conn, self._complete_conn = await self._claim_connection(), await self._connect()
        log.info("worker %s: queues %s, concurrency %d, lease %ss", self.name, self._queues, self.concurrency, self.lease)
        tasks = [asyncio.create_task(self._claimer()), asyncio.create_task(self._completer()),
                 asyncio.create_task(self._extender())]
        tasks += [asyncio.create_task(self._handle_loop()) for _ in range(self.concurrency)]
        await self._stopping.wait()
        await self._shutdown()
        # The loops end on _closed too: asyncio.wait_for (in _wait_change)
        # can swallow a cancellation that meets its own wake-up (Python < 3.12).
        self._closed = True
        self._changed()
        for t in tasks:
            t.cancel()
        await asyncio.wait(tasks, timeout=5)
        await self._claim_conn.close()
        await self._complete_conn.close()
        log.info("worker %s: stopped", self.name)

    def _unfinished(self):
        done = {job.id for job, _ in self._pending} | self._sending_ids
        return [job for job in self._held.values() if job.id not in done]

    async def _shutdown(self):
        log.info("worker %s: stopping, %d jobs in hand", self.name, len(self._held))
        deadline = time.monotonic() + self.shutdown_timeout
        unstarted = []
        while not self._jobs.empty():
            unstarted.append(self._jobs.get_nowait())
        await self._hand_back(unstarted)
        while (self._unfinished() or self._claiming) and time.monotonic() < deadline:
            await self._wait_change(min(0.05, max(0.0, deadline - time.monotonic())))
        late = self._unfinished()
        if late:
            log.warning("worker %s: %d jobs not finished within %ss, handed back", self.name, len(late), self.shutdown_timeout)
            await self._hand_back(late)
        while self._pending or self._sending:
            self._changed()
            await asyncio.sleep(0.005)

    async def _hand_back(self, jobs):
        jobs = [job for job in jobs if self._held.pop(job.id, None) is not None]
        for job in jobs:
            self._running.pop(job.id, None)
        if not jobs:
            return
        try:
            conn = await self._connect()
            try:
                for job in jobs:
                    try:
                        await conn.execute(_sql.REJECT, [job.id, job.attempt])
                    except psycopg.errors.Error as error:
                        log.warning("job %s: hand-back refused: %s", job.id, error)
            finally:
                await conn.close()
        except psycopg.Error as error:
            log.error("worker %s: hand-back failed (the leases will lapse): %s", self.name, error)
        finally:
            self._in_hand -= len(jobs)
            self._changed()

    def _book(self, rows):
        now = time.monotonic()
        jobs = [Job(row, self, now) for row in rows]
        for job in jobs:
            self._held[job.id] = job
        return jobs

    async def _dispatch(self, jobs):
        if self._stopping.is_set():
            await self._hand_back(jobs)
            return
        for job in jobs:
            self._jobs.put_nowait(job)
        self._changed()

    async def _claimer(self):
        while not self._stopping.is_set():
            while self._in_hand >= self.concurrency and not self._stopping.is_set():
                await self._wait_change(1.0)
            if self._stopping.is_set():
                return
            reserved = self.concurrency - self._in_hand
            self._in_hand += reserved
            self._claiming = True
            rows = []
            try:
                sql, params = _sql.claim(self._queues, self.name, reserved, self._lease,
                                         datetime.timedelta(seconds=self.claim_wait))
                cur = await self._claim_conn.execute(sql, params)
                rows = await cur.fetchall()
            except psycopg.Error as error:
                if self._stopping.is_set():
                    return
                log.error("worker %s: claim failed: %s", self.name, error)
                if self._claim_conn.closed or self._claim_conn.broken:
                    try:
                        self._claim_conn = await self._claim_connection()
                    except psycopg.Error:
                        pass
                await asyncio.sleep(0.5)
            finally:
                jobs = self._book(rows)
                self._in_hand -= reserved - len(rows)
                self._claiming = False
                self._changed()
            if jobs:
                await self._dispatch(jobs)

    async def _completer(self):
        while not self._closed:
            while not self._closed:
                if self._pending:
                    waited = time.monotonic() - self._pending_since
                    if (waited >= self.max_completion_delay or (not self._running and self._jobs.empty())
                            or len(self._pending) >= self.concurrency or self._stopping.is_set()):
                        break
                    await self._wait_change(self.max_completion_delay - waited)
                else:
                    await self._wait_change(0.2)
            if self._closed:
                return
            batch, self._pending = self._pending, []
            self._in_hand -= len(batch)
            reserved = 0 if self._stopping.is_set() else self.concurrency - self._in_hand
            self._in_hand += reserved
            self._sending, self._sending_ids = True, {job.id for job, _ in batch}
            rows = []
            try:
                rows = await self._send(batch, reserved)
            except psycopg.Error as error:
                log.error("worker %s: completion failed (the jobs' leases will lapse): %s", self.name, error)
                if self._complete_conn.closed or self._complete_conn.broken:
                    try:
                        self._complete_conn = await self._connect()
                    except psycopg.Error:
                        pass
            except Exception:  # never lose the task that completes
                log.exception("worker %s: completion failed (the jobs' leases will lapse)", self.name)
            finally:
                for job, _ in batch:
                    self._held.pop(job.id, None)
                jobs = self._book(rows)
                self._in_hand -= reserved - len(rows)
                self._sending, self._sending_ids = False, set()
                self._changed()
            if jobs:
                await self._dispatch(jobs)

    async def _send(self, batch, reserved):
        conn = self._complete_conn
        ids = [job.id for job, _ in batch]
        attempts = [job.attempt for job, _ in batch]
        results = [result for _, result in batch]
        try:
            if reserved:
                sql, params = _sql.complete_batch_and_claim(ids, attempts, results, self._queues, self.name,
                                                            reserved, self._lease)
                cur = await conn.execute(sql, params)
                return await cur.fetchall()
            sql, params = _sql.complete_batch(ids, attempts, results)
            await conn.execute(sql, params)
            return []
        except psycopg.errors.Error as error:
            if conn.broken:
                raise
            log.info("worker %s: batch completion refused (%s); completing one by one", self.name, error)
        for job, result in batch:
            try:
                sql, params = _sql.complete(job.id, job.attempt, result)
                await conn.execute(sql, params)
            except psycopg.errors.Error as error:
                log.warning("job %s: completion refused: %s", job.id, error)
        if not reserved:
            return []
        sql, params = _sql.claim(self._queues, self.name, reserved, self._lease, datetime.timedelta(0))
        cur = await conn.execute(sql, params)
        return await cur.fetchall()

    async def _extender(self):
        every = self.lease / 3
        conn = None
        while not self._closed:
            await asyncio.sleep(min(every / 2, 1.0))
            now = time.monotonic()
            due = [job for job in self._held.values() if now - job.leased_at >= every]
            if not due:
                continue
            try:
                if conn is None or conn.closed:
                    conn = await self._connect()
                for job in due:
                    try:
                        await conn.execute(_sql.EXTEND, [job.id, job.attempt, self._lease])
                        job.leased_at = now
                    except psycopg.errors.Error as error:
                        log.warning("job %s: lease extension refused: %s", job.id, error)
            except psycopg.Error as error:
                log.error("worker %s: lease extension failed: %s", self.name, error)
                conn = None

    async def _handle_loop(self):
        slot = _Slot(self)
        try:
            while True:
                job = await self._jobs.get()
                await self._handle(slot, job)
        finally:
            await slot.close()

    async def _handle(self, slot, job):
        job._slot = slot
        if job.id not in self._held:
            return
        self._running[job.id] = job
        handler = self.handlers[job.queue]
        outcome, result, error = "done", None, None
        try:
            if self.on_job is not None:
                result = self.on_job(job, lambda: handler(job))
            else:
                result = handler(job)
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                json.dumps(result)  # a result must be JSON: checked here, not in the batch it would break
        except Parked:
            outcome = "parked"
        except Exception as e:
            outcome, error = "failed", e
        mine = self._running.pop(job.id, None) is not None
        if not mine:
            log.warning("job %s: finished after it was handed back at shutdown; not completed", job.id)
            return
        if outcome == "done":
            if not self._pending:
                self._pending_since = time.monotonic()
            self._pending.append((job, result))
            self._changed()
            return
        if outcome == "failed":
            log.warning("job %s (queue %s, attempt %d) failed: %s", job.id, job.queue, job.attempt, error_text(error))
            try:
                await (await slot.connection()).execute(_sql.FAIL, [job.id, job.attempt, error_text(error), trace_text(error)])
            except psycopg.Error as e:
                log.warning("job %s: failure not recorded: %s", job.id, e)
        self._held.pop(job.id, None)
        self._in_hand -= 1
        self._changed()
