"""The worker runtime with psycopg 3 (sync, threads).

One connection claims with the SQL's own wait (rq_claim … wait), so an idle
worker sleeps in the server until an enqueue commits; one connection sends
the completions of all handlers together with the claim of the next jobs
(rq_complete_batch_and_claim), one round trip for a batch; `concurrency`
handler threads run the jobs, each opening a connection of its own only
when its handler needs one (durable steps, failures, job.conn); one thread
extends the leases of the jobs in hand. SIGTERM (or stop()) stops the
claims, lets the handlers finish within `shutdown_timeout`, and hands back
(rq_reject) what is not finished by then.
"""

import datetime
import json
import logging
import os
import queue as queue_module
import signal
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterable, Optional, Union
from uuid import UUID

import psycopg

from . import _sql, client
from ._common import JobBase, JobEnd, Parked, WaitTimedOut, error_text, trace_text

log = logging.getLogger("raquel_pg")

Handler = Callable[["Job"], Any]
Hook = Callable[["Job", Callable[[], Any]], Any]


class Job(JobBase):
    """The job a handler runs, with its durable context. Every verb passes
    the attempt (the fencing token) for you."""

    __slots__ = ()

    @property
    def conn(self) -> psycopg.Connection:
        """This handler's own connection (autocommit), to write in a step's
        transaction: what a step's function writes on it commits with the
        step's record, or not at all."""
        return self._slot.connection()

    def _done_steps(self):
        if self._steps is None:
            self._steps = dict(self.conn.execute(_sql.STEPS, [self.id]).fetchall())
        return self._steps

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Runs fn once for this job across its attempts (rq_step): a step
        already recorded returns its recorded result (JSON) without running
        fn again; otherwise fn's result is recorded under name in the same
        transaction as what fn wrote on job.conn."""
        done = self._done_steps()
        if name in done:
            return done[name]
        conn = self.conn
        with conn.transaction():
            result = fn()
            conn.execute(_sql.STEP, [self.id, self.attempt, name, _sql.Jsonb(result)])
        done[name] = result
        return result

    def sleep(self, name: str, duration: Optional[Union[int, float, datetime.timedelta]] = None, *,
              at: Optional[datetime.datetime] = None) -> None:
        """Sleeps (rq_sleep) for duration (seconds or timedelta) or until at,
        holding no worker: the first time, the job is handed back until then
        and this attempt ends here; on a later attempt it returns once the
        instant has passed."""
        sleeping = self.conn.execute(_sql.SLEEP, [self.id, self.attempt, name, at, _sql.interval(duration)]).fetchone()[0]
        if sleeping:
            raise Parked()

    def wait_event(self, name: str, event: str, timeout: Optional[Union[int, float, datetime.timedelta]] = None) -> Any:
        """Waits for the event (rq_wait_event) and returns its payload: the
        job is parked (this attempt ends here) until it is emitted; raises
        WaitTimedOut when the timeout passed first (None: raquel.max_event_wait)."""
        parked, payload, timed_out = self.conn.execute(
            _sql.WAIT_EVENT, [self.id, self.attempt, name, event, _sql.interval(timeout)]).fetchone()
        if parked:
            raise Parked()
        if timed_out:
            raise WaitTimedOut(f"event {event!r} (wait {name!r}) was not emitted within its timeout")
        return payload

    def await_job(self, job_id: Union[UUID, str], *, name: Optional[str] = None,
                  timeout: Optional[Union[int, float, datetime.timedelta]] = None) -> JobEnd:
        """Waits for another job to end (rq_wait_job), holding no worker, and
        returns its status, result and error; the step is named name
        (default 'await:<id>'). Raises WaitTimedOut past the timeout."""
        parked, status, result, error, timed_out = self.conn.execute(
            _sql.WAIT_JOB, [self.id, self.attempt, name or f"await:{job_id}", job_id, _sql.interval(timeout)]).fetchone()
        if parked:
            raise Parked()
        if timed_out:
            raise WaitTimedOut(f"job {job_id} did not end within the wait's timeout")
        return JobEnd(status, result, error)

    def enqueue(self, queue: str, payload: Any = None, **options) -> UUID:
        """client.enqueue on job.conn: inside a step, the child job is
        enqueued exactly once, with the step's record."""
        return client.enqueue(self.conn, queue, payload, **options)

    def emit(self, event: str, payload: Any = None, **options) -> Optional[int]:
        return client.emit(self.conn, event, payload, **options)


class _Slot:
    """A handler thread's connection, opened on first use and kept."""

    def __init__(self, worker):
        self.worker, self.conn = worker, None

    def connection(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed:
            self.conn = self.worker._connect()
        return self.conn

    def close(self):
        if self.conn is not None:
            self.conn.close()


class Worker:
    """Runs handlers by queue.

    conninfo: a libpq string or URL. handlers: {queue: handler} (or
    @worker.handler(queue)). A handler takes the Job and returns its result
    (JSON, or None); an exception fails the attempt with its message and
    trace (retried per the job's retry settings).

    concurrency: jobs handled at once (threads). lease: seconds a claim
    holds a job; the runtime extends it (rq_extend) every lease/3 while the
    job is in hand. claim_wait: how long one waiting claim sleeps in the
    server before it is issued again (the enqueue's commit wakes it sooner).
    max_completion_delay: the longest a finished job's completion waits to
    be batched with others before it is sent. shutdown_timeout: how long a
    stop lets handlers finish before it hands their jobs back. name: the
    claimed_by of its jobs. on_job: a hook around each job, called as
    on_job(job, run) where run() runs the handler and returns its result
    (for a tracing span). connect_kwargs: more psycopg.connect arguments."""

    def __init__(self, conninfo: str, handlers: Optional[Dict[str, Handler]] = None, *, concurrency: int = 10,
                 lease: float = 30.0, claim_wait: float = 5.0, max_completion_delay: float = 0.01,
                 shutdown_timeout: float = 30.0, name: Optional[str] = None, on_job: Optional[Hook] = None,
                 connect_kwargs: Optional[dict] = None):
        if concurrency < 1:
            raise ValueError(f"concurrency is at least 1, not {concurrency}")
        if lease <= 0 or claim_wait < 0 or max_completion_delay < 0 or shutdown_timeout < 0:
            raise ValueError("lease is positive; claim_wait, max_completion_delay and shutdown_timeout are >= 0")
        self.conninfo = conninfo
        self.handlers: Dict[str, Handler] = dict(handlers or {})
        self.concurrency, self.lease, self.claim_wait = concurrency, lease, claim_wait
        self.max_completion_delay, self.shutdown_timeout = max_completion_delay, shutdown_timeout
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.on_job, self.connect_kwargs = on_job, dict(connect_kwargs or {})
        self._cond = threading.Condition()
        self._in_hand = 0  # jobs claimed (or slots reserved for a claim) and not yet ended or sent
        self._pending = []  # finished jobs waiting to be completed: (job, result)
        self._pending_since = 0.0
        self._running: Dict[UUID, Job] = {}  # jobs whose handler runs
        self._held: Dict[UUID, Job] = {}  # every job in hand, for the lease extension and the hand-back
        self._jobs: "queue_module.Queue[Optional[Job]]" = queue_module.Queue()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._threads = []

    # -- configuration ------------------------------------------------------

    def handler(self, queue: str):
        """Decorator: @worker.handler('emails') def send(job): …"""
        def register(fn):
            self.handlers[queue] = fn
            return fn
        return register

    def _connect(self) -> psycopg.Connection:
        return psycopg.connect(self.conninfo, autocommit=True, **self.connect_kwargs)

    def _claim_connection(self) -> psycopg.Connection:
        conn = self._connect()
        # A waiting claim whose worker died would otherwise go on waiting in
        # the server and claim a job for nobody (its lease must lapse first):
        # the server checks every second that the client is still there.
        try:
            conn.execute("SET client_connection_check_interval = '1s'")
        except psycopg.Error:
            pass  # before PostgreSQL 14, or not on this platform
        return conn

    # -- running ------------------------------------------------------------

    def run(self, install_signal_handlers: bool = True) -> None:
        """Runs until SIGTERM or SIGINT (when called from the main thread and
        install_signal_handlers) or stop(); then shuts down gracefully."""
        if not self.handlers:
            raise ValueError("a worker needs at least one handler (Worker(conninfo, {queue: handler}))")
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda s, f: self.stop())
        self._queues = list(self.handlers)
        self._lease = datetime.timedelta(seconds=self.lease)
        self._claim_conn, self._complete_conn = self._claim_connection(), self._connect()
        log.info("worker %s: queues %s, concurrency %d, lease %ss", self.name, self._queues, self.concurrency, self.lease)
        targets = [self._claimer, self._completer, self._extender] + [self._handle_loop] * self.concurrency
        self._threads = [threading.Thread(target=t, name=f"raquel_pg-{i}", daemon=True) for i, t in enumerate(targets)]
        for t in self._threads:
            t.start()
        # Wait in short sleeps so that the main thread's signal handler runs.
        while not self._stopping.wait(0.2):
            pass
        self._shutdown()

    def start(self) -> None:
        """Runs the worker in a thread of its own (no signal handlers); stop() ends it."""
        t = threading.Thread(target=self.run, kwargs={"install_signal_handlers": False}, daemon=True)
        t.start()
        self._runner = t

    def stop(self, wait: bool = False) -> None:
        """Stops claiming and shuts down gracefully (as SIGTERM does)."""
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
            claiming = self._claiming
        conn = getattr(self, "_claim_conn", None)
        if claiming and conn is not None and not conn.closed:
            # Cut the waiting claim short: a cancelled claim rolls back and
            # claims nothing, so no job is left behind.
            try:
                conn.cancel()
            except psycopg.Error:
                pass
        if wait:
            self._stopped.wait()

    def join(self, timeout: Optional[float] = None) -> bool:
        return self._stopped.wait(timeout)

    def _shutdown(self):
        log.info("worker %s: stopping, %d jobs in hand", self.name, len(self._held))
        deadline = time.monotonic() + self.shutdown_timeout
        # Jobs claimed but not started go back at once.
        unstarted = []
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue_module.Empty:
                break
            if job is not None:
                unstarted.append(job)
        self._hand_back(unstarted)
        with self._cond:
            while (self._unfinished() or self._claiming) and time.monotonic() < deadline:
                self._cond.wait(min(0.05, max(0.0, deadline - time.monotonic())))
            late = self._unfinished()
        if late:
            log.warning("worker %s: %d jobs not finished within %ss, handed back", self.name, len(late), self.shutdown_timeout)
            self._hand_back(late)
        # The completer sends what is pending.
        with self._cond:
            self._cond.notify_all()
            while self._pending or self._sending:
                self._cond.wait(0.05)
        for _ in range(self.concurrency):
            self._jobs.put(None)
        for conn in (self._claim_conn, self._complete_conn):
            conn.close()
        self._stopped.set()
        log.info("worker %s: stopped", self.name)

    def _unfinished(self):
        """The jobs in hand whose handler has not finished (called under the lock)."""
        done = {job.id for job, _ in self._pending} | self._sending_ids
        return [job for job in self._held.values() if job.id not in done]

    def _hand_back(self, jobs):
        """rq_reject: the jobs go back to their queue at once, no retry used.
        They leave the books first, so a handler ending now sends nothing."""
        with self._cond:
            jobs = [job for job in jobs if self._held.pop(job.id, None) is not None]
            for job in jobs:
                self._running.pop(job.id, None)
        if not jobs:
            return
        try:
            conn = self._connect()
            try:
                for job in jobs:
                    try:
                        conn.execute(_sql.REJECT, [job.id, job.attempt])
                    except psycopg.errors.Error as error:
                        log.warning("job %s: hand-back refused: %s", job.id, error)
            finally:
                conn.close()
        except psycopg.Error as error:
            log.error("worker %s: hand-back failed (the leases will lapse): %s", self.name, error)
        finally:
            with self._cond:
                self._in_hand -= len(jobs)
                self._cond.notify_all()

    _claiming = False
    _sending = False
    _sending_ids: set = frozenset()

    def _book(self, rows):
        """Jobs just claimed enter the books (under the lock, before the
        claim is marked over, so a shutdown never misses them)."""
        now = time.monotonic()
        jobs = [Job(row, self, now) for row in rows]
        for job in jobs:
            self._held[job.id] = job
        return jobs

    def _dispatch(self, jobs):
        """Into the local queue, or straight back when stopping."""
        if self._stopping.is_set():
            self._hand_back(jobs)
            return
        for job in jobs:
            self._jobs.put(job)

    def _claimer(self):
        """The waiting claim, for the slots the completer's claims leave free."""
        conn = self._claim_conn
        while not self._stopping.is_set():
            with self._cond:
                while self._in_hand >= self.concurrency and not self._stopping.is_set():
                    self._cond.wait()
                if self._stopping.is_set():
                    return
                reserved = self.concurrency - self._in_hand
                self._in_hand += reserved
                self._claiming = True
            rows = []
            try:
                sql, params = _sql.claim(self._queues, self.name, reserved, self._lease,
                                         datetime.timedelta(seconds=self.claim_wait))
                rows = conn.execute(sql, params).fetchall()
            except psycopg.Error as error:
                if self._stopping.is_set():
                    return  # the claim cancelled by stop(): it claimed nothing
                log.error("worker %s: claim failed: %s", self.name, error)
                if conn.closed or conn.broken:
                    conn = self._claim_conn = self._reconnect(conn, self._claim_connection)
                time.sleep(0.5)
            finally:
                with self._cond:
                    jobs = self._book(rows)
                    self._in_hand -= reserved - len(rows)
                    self._claiming = False
                    self._cond.notify_all()
            if jobs:
                self._dispatch(jobs)

    def _reconnect(self, old, connect):
        while not self._stopping.is_set():
            try:
                return connect()
            except psycopg.Error as error:
                log.error("worker %s: cannot connect: %s", self.name, error)
                time.sleep(1)
        return old

    def _completer(self):
        """Sends the finished jobs' completions together, with the claim of as
        many next jobs as that frees slots (one round trip), at the latest
        max_completion_delay after the first of them finished."""
        conn = self._complete_conn
        while True:
            with self._cond:
                while True:
                    if self._pending:
                        waited = time.monotonic() - self._pending_since
                        # Send now when nothing else could join the batch soon.
                        if (waited >= self.max_completion_delay or (not self._running and self._jobs.empty())
                                or len(self._pending) >= self.concurrency or self._stopping.is_set()):
                            break
                        self._cond.wait(self.max_completion_delay - waited)
                    else:
                        self._cond.wait(0.2)
                batch, self._pending = self._pending, []
                self._in_hand -= len(batch)
                reserved = 0 if self._stopping.is_set() else self.concurrency - self._in_hand
                self._in_hand += reserved
                self._sending = True
                self._sending_ids = {job.id for job, _ in batch}
            rows = []
            try:
                rows = self._send(conn, batch, reserved)
            except psycopg.Error as error:
                log.error("worker %s: completion failed (the jobs' leases will lapse): %s", self.name, error)
                if conn.closed or conn.broken:
                    conn = self._complete_conn = self._reconnect(conn, self._connect)
            except Exception:  # never lose the thread that completes
                log.exception("worker %s: completion failed (the jobs' leases will lapse)", self.name)
            finally:
                with self._cond:
                    for job, _ in batch:
                        self._held.pop(job.id, None)
                    jobs = self._book(rows)
                    self._in_hand -= reserved - len(rows)
                    self._sending = False
                    self._sending_ids = frozenset()
                    self._cond.notify_all()
            if jobs:
                self._dispatch(jobs)

    def _send(self, conn, batch, reserved):
        ids = [job.id for job, _ in batch]
        attempts = [job.attempt for job, _ in batch]
        results = [result for _, result in batch]
        try:
            if reserved:
                sql, params = _sql.complete_batch_and_claim(ids, attempts, results, self._queues, self.name,
                                                            reserved, self._lease)
                return conn.execute(sql, params).fetchall()
            sql, params = _sql.complete_batch(ids, attempts, results)
            conn.execute(sql, params)
            return []
        except psycopg.errors.Error as error:
            if len(batch) <= 1 and not reserved:
                log.warning("job %s: completion refused: %s", ids[0], error)
                return []
            if conn.broken:
                raise
            # All or nothing: one refused completion (a lease lost, a job
            # cancelled) refuses the batch, so complete each alone.
            log.info("worker %s: batch completion refused (%s); completing one by one", self.name, error)
        for job, result in batch:
            try:
                sql, params = _sql.complete(job.id, job.attempt, result)
                conn.execute(sql, params)
            except psycopg.errors.Error as error:
                log.warning("job %s: completion refused: %s", job.id, error)
        if not reserved:
            return []
        sql, params = _sql.claim(self._queues, self.name, reserved, self._lease, datetime.timedelta(0))
        return conn.execute(sql, params).fetchall()

    def _extender(self):
        """Extends the lease of every job in hand a third of a lease after its
        claim or its last extension, so a slow handler keeps its job."""
        every = self.lease / 3
        conn = None
        while not self._stopped.wait(min(every / 2, 1.0)):
            now = time.monotonic()
            with self._cond:
                due = [job for job in self._held.values() if now - job.leased_at >= every]
            if not due:
                continue
            try:
                if conn is None or conn.closed:
                    conn = self._connect()
                for job in due:
                    try:
                        conn.execute(_sql.EXTEND, [job.id, job.attempt, self._lease])
                        job.leased_at = now
                    except psycopg.errors.Error as error:
                        log.warning("job %s: lease extension refused: %s", job.id, error)
            except psycopg.Error as error:
                log.error("worker %s: lease extension failed: %s", self.name, error)
                conn = None

    def _handle_loop(self):
        slot = _Slot(self)
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                self._handle(slot, job)
        finally:
            slot.close()

    def _handle(self, slot, job):
        job._slot = slot
        with self._cond:
            if job.id not in self._held:
                return  # handed back at shutdown before it started
            self._running[job.id] = job
        handler = self.handlers[job.queue]
        outcome, result, error = "done", None, None
        try:
            if self.on_job is not None:
                result = self.on_job(job, lambda: handler(job))
            else:
                result = handler(job)
            if result is not None:
                json.dumps(result)  # a result must be JSON: checked here, not in the batch it would break
        except Parked:
            outcome = "parked"
        except Exception as e:  # the attempt failed: recorded, retried per the job's settings
            outcome, error = "failed", e
        with self._cond:
            mine = self._running.pop(job.id, None) is not None
            if mine and outcome == "done":
                if not self._pending:
                    self._pending_since = time.monotonic()
                self._pending.append((job, result))
                self._cond.notify_all()
                return
        if not mine:
            log.warning("job %s: finished after it was handed back at shutdown; not completed", job.id)
            return
        if outcome == "failed":
            log.warning("job %s (queue %s, attempt %d) failed: %s", job.id, job.queue, job.attempt, error_text(error))
            try:
                slot.connection().execute(_sql.FAIL, [job.id, job.attempt, error_text(error), trace_text(error)])
            except psycopg.Error as e:
                log.warning("job %s: failure not recorded: %s", job.id, e)
        with self._cond:
            self._held.pop(job.id, None)
            self._in_hand -= 1
            self._cond.notify_all()
