"""The tests of raquel_pg against a real server (RAQUEL_TEST_DSN), each on
queues of its own in the database rq_lib_py_main, made afresh. Run by
libraries/python/test; prints one line a test and, last, "N passed, M failed"."""

import asyncio
import collections
import os
import signal
import subprocess
import sys
import threading
import time
import traceback

import psycopg

import raquel_pg
from raquel_pg import aio

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.environ["RAQUEL_TEST_DSN"]
DB = "rq_lib_py_main"
DSN = f"{BASE} dbname={DB}"
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def connect():
    return psycopg.connect(DSN, autocommit=True)


def setup_database():
    with psycopg.connect(f"{BASE} dbname=postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    with connect() as conn:
        conn.execute("CREATE EXTENSION raquel")


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout} s: {what}")


def statuses(conn, queue):
    return dict(conn.execute("SELECT status, count(*) FROM jobs WHERE queue = %s GROUP BY status", [queue]).fetchall())


def count(conn, queue, status):
    return statuses(conn, queue).get(status, 0)


class Running:
    """A raquel_pg.Worker in a thread of this process, stopped on exit."""

    def __init__(self, handlers, **options):
        options.setdefault("claim_wait", 1.0)
        self.worker = raquel_pg.Worker(DSN, handlers, **options)

    def __enter__(self):
        self.worker.start()
        return self.worker

    def __exit__(self, *exc):
        self.worker.stop()
        assert self.worker.join(15), "the worker did not stop within 15 s"


class Proc:
    """A worker process (proc_worker.py), its stdout read by a thread."""

    def __init__(self, queue, lease, concurrency, shutdown_timeout):
        self.p = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "proc_worker.py"), DSN, queue, str(lease), str(concurrency),
             str(shutdown_timeout)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.split())

    def started(self):
        return [l for l in self.lines if l and l[0] == "started"]

    def done(self):
        return {l[1] for l in self.lines if l and l[0] == "done"}

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


# -- enqueue -------------------------------------------------------------------

@test
def enqueue_alone_with_options():
    with connect() as conn:
        job = raquel_pg.enqueue(conn, "lib-enq", {"n": 1}, priority=5, delay=60, max_retry_count=3, max_age=3600)
        row = conn.execute("SELECT queue, payload::jsonb, priority, max_retry_count, max_age, status,"
                           " scheduled_at - enqueued_at FROM jobs WHERE id = %s", [job]).fetchone()
        assert row[:6] == ("lib-enq", {"n": 1}, 5, 3, 3600000, "queued"), row
        assert 59000 <= row[6] <= 61000, f"delay of 60 s stored as {row[6]} ms"
        text_job = raquel_pg.enqueue(conn, "lib-enq", "plain text")
        assert conn.execute("SELECT payload FROM jobs WHERE id = %s", [text_job]).fetchone()[0] == "plain text"
        first = raquel_pg.enqueue(conn, "lib-enq", "k", key="dedup-1")
        again = raquel_pg.enqueue(conn, "lib-enq", "k again", key="dedup-1")
        assert first == again, "a key enqueued again while its job is unfinished returns that job"
        try:
            raquel_pg.enqueue(conn, "lib-enq", "x", retries=3)
            raise AssertionError("an unknown option was accepted")
        except TypeError as error:
            assert "retries" in str(error)


@test
def enqueue_in_a_transaction_that_rolls_back_leaves_no_job():
    with psycopg.connect(DSN) as conn:  # not autocommit: the caller's transaction
        with conn.transaction(force_rollback=True):
            job = raquel_pg.enqueue(conn, "lib-rollback", "gone")
            ids = raquel_pg.enqueue_batch(conn, "lib-rollback", ["a", "b"])
            assert conn.execute("SELECT count(*) FROM jobs WHERE queue = 'lib-rollback'").fetchone()[0] == 3
    with connect() as other:  # another connection sees nothing
        assert other.execute("SELECT count(*) FROM jobs WHERE id = ANY(%s)", [[job] + ids]).fetchone()[0] == 0
    with psycopg.connect(DSN) as conn:
        with conn.transaction():
            kept = raquel_pg.enqueue(conn, "lib-rollback", "kept")
    with connect() as other:
        assert other.execute("SELECT status FROM jobs WHERE id = %s", [kept]).fetchone()[0] == "queued"


@test
def enqueue_batch_keeps_order_and_types():
    with connect() as conn:
        ids = raquel_pg.enqueue_batch(conn, "lib-batch", [{"seq": i} for i in range(100)], priority=2)
        assert len(ids) == 100
        rows = conn.execute("SELECT id, payload::jsonb ->> 'seq', priority FROM jobs WHERE id = ANY(%s)", [ids]).fetchall()
        by_id = {r[0]: (int(r[1]), r[2]) for r in rows}
        assert [by_id[i][0] for i in ids] == list(range(100)), "ids come back in the payloads' order"
        assert {p for _, p in by_id.values()} == {2}
        raquel_pg.enqueue_batch(conn, "lib-batch", ["a", "b"], keys=["ka", "ka"])
        assert conn.execute("SELECT count(*) FROM jobs WHERE queue = 'lib-batch' AND key = 'ka'").fetchone()[0] == 1, \
            "a key repeated in a batch makes one job"


# -- the worker ----------------------------------------------------------------

@test
def two_workers_drain_every_job_exactly_once():
    n, seen, lock = 600, collections.Counter(), threading.Lock()

    def handle(job):
        with lock:
            seen[job.data["seq"]] += 1
        return {"seq": job.data["seq"]}

    with connect() as conn:
        raquel_pg.enqueue_batch(conn, "lib-drain", [{"seq": i} for i in range(n)])
        with Running({"lib-drain": handle}, concurrency=8, name="drain-a"), \
                Running({"lib-drain": handle}, concurrency=8, name="drain-b"):
            wait_for(lambda: count(conn, "lib-drain", "success") == n, 60, f"{n} jobs succeeded")
        assert sorted(seen) == list(range(n)), "every job was handled"
        doubled = [s for s, c in seen.items() if c != 1]
        assert not doubled, f"jobs handled more than once: {doubled[:10]}"
        assert statuses(conn, "lib-drain") == {"success": n}
        bad = conn.execute("SELECT count(*) FROM jobs WHERE queue = 'lib-drain' AND (attempts <> 1"
                           " OR result ->> 'seq' <> payload::jsonb ->> 'seq')").fetchone()[0]
        assert bad == 0, f"{bad} jobs claimed more than once or with another's result"
        workers = conn.execute("SELECT count(DISTINCT claimed_by) FROM jobs WHERE queue = 'lib-drain'").fetchone()[0]
        assert workers == 2, f"both workers took jobs ({workers})"


@test
def a_worker_killed_mid_job_loses_it_to_another_and_is_fenced():
    queue = "lib-kill"
    with connect() as conn:
        job = raquel_pg.enqueue(conn, queue, "hang", min_retry_delay=0, backoff_base=0)
        proc = Proc(queue, lease=1.0, concurrency=2, shutdown_timeout=5)
        try:
            started = wait_for(proc.started, 20, "the worker process started the job")
            assert started[0][1] == str(job) and started[0][2] == "1"
            proc.p.send_signal(signal.SIGKILL)
            proc.p.wait(10)
        finally:
            proc.kill()
        assert conn.execute("SELECT status FROM jobs WHERE id = %s", [job]).fetchone()[0] == "claimed"
        # The lease (1 s) lapses; the rescue duty (called here rather than
        # waiting for the background worker's round) hands the job out again.
        wait_for(lambda: conn.execute("SELECT rq_rescue()").fetchone()[0] >= 1
                 or conn.execute("SELECT status <> 'claimed' FROM jobs WHERE id = %s", [job]).fetchone()[0],
                 15, "the job's lease lapsed and it was rescued")
        handled = []
        with Running({queue: lambda j: handled.append((j.id, j.attempt)) or "second"}, name="kill-b"):
            wait_for(lambda: count(conn, queue, "success") == 1, 20, "the second worker completed the job")
        history = conn.execute("SELECT attempt, worker, outcome, error FROM rq_history(%s)", [job]).fetchall()
        # Attempt 1 lapsed with its lease; the killed process's waiting claim
        # did not outlive it in the server to take the job once more.
        assert history[0][:3] == (1, "proc-lib-kill", "failed") and "lease expired" in history[0][3], history
        assert handled == [(job, 2)], (handled, history)
        row = conn.execute("SELECT status, attempts, claimed_by, result #>> '{}' FROM jobs WHERE id = %s", [job]).fetchone()
        assert row == ("success", handled[0][1], "kill-b", "second"), row
        # The dead worker's completion, on its attempt 1, is refused by fencing.
        try:
            conn.execute("SELECT rq_complete(%s, 1)", [job])
            raise AssertionError("a completion on the lost attempt was accepted")
        except psycopg.errors.ObjectNotInPrerequisiteState:
            pass


@test
def sigterm_during_a_batch_completes_what_finished_and_hands_back_the_rest():
    queue = "lib-term"
    with connect() as conn:
        fast = raquel_pg.enqueue_batch(conn, queue, ["fast", "fast"], priority=10)
        slow = raquel_pg.enqueue_batch(conn, queue, ["slow", "slow"], priority=10)
        rest = raquel_pg.enqueue_batch(conn, queue, ["rest"] * 10)
        proc = Proc(queue, lease=30, concurrency=4, shutdown_timeout=2.5)
        try:
            wait_for(lambda: len(proc.started()) >= 4, 20, "the worker process started its 4 jobs")
            sent = time.monotonic()
            proc.p.send_signal(signal.SIGTERM)
            code = proc.p.wait(15)
            took = time.monotonic() - sent
        finally:
            proc.kill()
        assert code == 0, f"the worker exited {code}: {proc.p.stderr.read()[-2000:]}"
        assert took < 2.5 + 3, f"the shutdown took {took:.1f} s for a deadline of 2.5 s"
        assert {l[1] for l in proc.started()} == {str(i) for i in fast + slow}, \
            ("it claimed nothing after SIGTERM", proc.lines, fast, slow, proc.p.stderr.read()[-3000:])
        done = dict(conn.execute("SELECT id, status FROM jobs WHERE queue = %s", [queue]).fetchall())
        assert all(done[i] == "success" for i in fast), f"the finished jobs were completed: {[done[i] for i in fast]}"
        assert all(done[i] == "queued" for i in slow), f"the unfinished jobs were handed back: {[done[i] for i in slow]}"
        assert all(done[i] == "queued" for i in rest)
        assert conn.execute("SELECT count(*) FROM jobs WHERE id = ANY(%s) AND attempts = 0", [rest]).fetchone()[0] == 10
        seen = collections.Counter()
        with Running({queue: lambda j: seen.update([j.id])}, name="term-b"):
            wait_for(lambda: count(conn, queue, "success") == 14, 20, "the second worker completed the rest")
        assert set(seen) == set(slow + rest), "the second worker ran exactly what was not finished"
        assert set(seen.values()) == {1}, "none doubled"
        assert statuses(conn, queue) == {"success": 14}


@test
def a_failure_is_recorded_with_its_error_and_trace():
    def broken_handler(job):
        raise ValueError(f"cannot handle {job.payload}")

    with connect() as conn:
        job = raquel_pg.enqueue(conn, "lib-fail", "this", max_retry_count=0)
        with Running({"lib-fail": broken_handler}):
            wait_for(lambda: count(conn, "lib-fail", "exhausted") == 1, 20, "the job failed for good")
        error, trace = conn.execute("SELECT error, error_trace FROM jobs WHERE id = %s", [job]).fetchone()
        assert error == "ValueError: cannot handle this", error
        assert "Traceback" in trace and "broken_handler" in trace, trace


@test
def lease_extension_keeps_a_slow_job_from_being_rescued():
    with connect() as conn:
        job = raquel_pg.enqueue(conn, "lib-extend", "slow")

        def slow(j):
            time.sleep(3.5)  # three and a half leases
            return "finished"

        with Running({"lib-extend": slow}, lease=1.0):
            def rescued_or_done():
                conn.execute("SELECT rq_rescue()")  # the duty, as often as it may run
                return conn.execute("SELECT status FROM jobs WHERE id = %s", [job]).fetchone()[0] != "claimed"
            wait_for(lambda: conn.execute("SELECT status FROM jobs WHERE id = %s", [job]).fetchone()[0] == "claimed",
                     10, "the job was claimed")
            wait_for(rescued_or_done, 20, "the job ended")
            wait_for(lambda: count(conn, "lib-extend", "success") == 1, 5, "the job succeeded")
        row = conn.execute("SELECT status, attempts, error FROM jobs WHERE id = %s", [job]).fetchone()
        assert row == ("success", 1, None), f"the job was rescued despite the extension: {row}"


@test
def durable_context_steps_sleep_event_and_child():
    runs = collections.Counter()

    def parent(job):
        a = job.step("a", lambda: runs.update(["a"]) or {"a": 1})
        if job.attempt == 1:
            raise RuntimeError("fail once after step a")
        job.sleep("nap", 0.3)
        runs.update(["after-sleep"])
        paid = job.wait_event("paid", f"paid:{job.id}", timeout=30)
        child = job.step("child", lambda: str(job.enqueue("lib-durable-child", "pack")))
        end = job.await_job(child)
        return {"a": a, "paid": paid, "child": end.result, "status": end.status}

    with connect() as conn:
        job = raquel_pg.enqueue(conn, "lib-durable", "order", min_retry_delay=0, backoff_base=0)
        def child(j):
            # The parent parks before the child ends: a wait that races the
            # awaited job's end can stay parked until the background worker's
            # sweep (rq_settle_waits), which the server owes, not this library.
            time.sleep(0.5)
            return {"box": j.payload}

        with Running({"lib-durable": parent, "lib-durable-child": child}):
            # (60 s: under a whole bin/test run's load the 20 s once ran out)
            wait_for(lambda: conn.execute("SELECT count(*) FROM job_waits WHERE job_id = %s", [job]).fetchone()[0],
                     60, "the job parked for its event")
            assert conn.execute("SELECT status FROM jobs WHERE id = %s", [job]).fetchone()[0] == "queued"
            assert raquel_pg.emit(conn, f"paid:{job}", {"amount": 12}) == 1
            end = raquel_pg.wait_result(conn, job, timeout=20)
        if end.status != "success":  # say where it stopped
            diag = [conn.execute("SELECT status, attempts, scheduled_at - rq_now_ms(), claimed_by FROM jobs WHERE id = %s", [job]).fetchone(),
                    conn.execute("SELECT name, kind, result FROM job_steps WHERE job_id = %s", [job]).fetchall(),
                    conn.execute("SELECT * FROM job_waits WHERE job_id = %s", [job]).fetchall(),
                    conn.execute("SELECT attempt, outcome, error FROM rq_history(%s)", [job]).fetchall(),
                    conn.execute("SELECT status, attempts FROM jobs WHERE queue = 'lib-durable-child'").fetchall()]
            # how many raced waits the background worker's sweep had left undelivered
            settled = conn.execute("SELECT raquel_internal.rq_settle_waits()").fetchone()[0]
            raise AssertionError(f"{end}: {diag}; rq_settle_waits() by hand delivered {settled}")
        assert end.result == {"a": {"a": 1}, "paid": {"amount": 12}, "child": {"box": "pack"}, "status": "success"}, end
        assert runs["a"] == 1, f"step a ran {runs['a']} times: its result was recomputed on the retry"
        steps = dict(conn.execute("SELECT name, kind FROM job_steps WHERE job_id = %s", [job]).fetchall())
        assert steps.get("nap") == "sleep" and steps.get("paid") == "event" and steps.get("a") == "step", steps
        # The sleep parked the job once: the code after it ran on later attempts only.
        error, attempts = conn.execute("SELECT error, attempts FROM jobs WHERE id = %s", [job]).fetchone()
        assert attempts >= 4, f"attempts {attempts}: a failure, a sleep, an event and the child each end one"


@test
def a_completion_waits_no_longer_than_its_bound():
    queue = "lib-bound"
    finished = {}

    def handle(job):
        if job.payload == "slow":
            time.sleep(4)
        finished[job.payload] = time.monotonic()

    with connect() as conn:
        slow = raquel_pg.enqueue(conn, queue, "slow", priority=1)
        fast = raquel_pg.enqueue(conn, queue, "fast")
        with Running({queue: handle}, concurrency=2, max_completion_delay=0.3):
            wait_for(lambda: "fast" in finished, 10, "the fast job ran")
            wait_for(lambda: conn.execute("SELECT status FROM jobs WHERE id = %s", [fast]).fetchone()[0] == "success",
                     1.5, "the fast job's completion was sent within its bound, not held for the slow one")
            seen = time.monotonic() - finished["fast"]
            assert "slow" not in finished, "the slow job was still running"
            assert conn.execute("SELECT status FROM jobs WHERE id = %s", [slow]).fetchone()[0] == "claimed"
            assert seen < 1.5, seen
            wait_for(lambda: count(conn, queue, "success") == 2, 10, "both completed")


@test
def tracing_hook_and_logging_around_each_job():
    calls = []

    def hook(job, run):
        calls.append(("before", job.payload))
        result = run()
        calls.append(("after", result))
        return result

    with connect() as conn:
        raquel_pg.enqueue(conn, "lib-hook", "x")
        with Running({"lib-hook": lambda j: j.payload.upper()}, on_job=hook):
            wait_for(lambda: count(conn, "lib-hook", "success") == 1, 10, "the job succeeded")
        assert calls == [("before", "x"), ("after", "X")], calls
        assert conn.execute("SELECT result #>> '{}' FROM jobs WHERE queue = 'lib-hook'").fetchone()[0] == "X"


@test
def asyncio_worker_drains_and_runs_durable_steps():
    n, seen = 300, collections.Counter()
    step_runs = collections.Counter()

    async def handle(job):
        seen[job.data["seq"]] += 1
        if job.data["seq"] == 0:
            await job.step("one", lambda: step_runs.update(["one"]) or 1)
            if job.attempt == 1:
                raise RuntimeError("again")
        return job.data["seq"]

    async def main():
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
            await aio.enqueue_batch(conn, "lib-aio", [{"seq": i} for i in range(n)], min_retry_delay=0, backoff_base=0)
            worker = aio.Worker(DSN, {"lib-aio": handle}, concurrency=10, claim_wait=1.0)
            task = asyncio.create_task(worker.run(install_signal_handlers=False))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                cur = await conn.execute("SELECT count(*) FROM jobs WHERE queue = 'lib-aio' AND status = 'success'")
                if (await cur.fetchone())[0] == n:
                    break
                await asyncio.sleep(0.05)
            worker.stop()
            await asyncio.wait_for(task, 15)

    asyncio.run(main())
    with connect() as conn:
        assert statuses(conn, "lib-aio") == {"success": n}
    assert sorted(seen) == list(range(n))
    assert seen[0] == 2 and all(c == 1 for s, c in seen.items() if s), "job 0 twice (a failure), the rest once"
    assert step_runs["one"] == 1, "the step was not run again on the retry"


@test
def the_durable_example_runs_its_three_steps_sleep_and_event():
    import importlib.util

    os.environ["COOL_OFF"] = "0.3"
    spec = importlib.util.spec_from_file_location("durable_order", os.path.join(HERE, "..", "examples", "durable_order.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with connect() as conn:
        job = raquel_pg.enqueue(conn, "lib-orders", {"order": "ex-7"})
        with Running({"lib-orders": example.order}):
            wait_for(lambda: conn.execute("SELECT count(*) FROM job_waits WHERE job_id = %s", [job]).fetchone()[0],
                     20, "the order parked for its payment")
            raquel_pg.emit(conn, "paid:ex-7", {"amount": 12})
            end = raquel_pg.wait_result(conn, job, timeout=20)
        assert end.status == "success" and end.result == {"shipped": "R-ex-7", "receipt": "paid 12"}, end
        steps = conn.execute("SELECT name FROM job_steps WHERE job_id = %s ORDER BY recorded_at", [job]).fetchall()
        assert [s[0] for s in steps] == ["reserve", "cool-off", "payment", "charge", "ship"], steps


def main():
    setup_database()
    only = sys.argv[1:]
    passed = failed = 0
    for fn in TESTS:
        if only and not any(o in fn.__name__ for o in only):
            continue
        started = time.monotonic()
        try:
            fn()
            passed += 1
            print(f"ok     {fn.__name__} ({time.monotonic() - started:.1f} s)", flush=True)
        except Exception:
            failed += 1
            print(f"FAILED {fn.__name__} ({time.monotonic() - started:.1f} s)", flush=True)
            traceback.print_exc()
    print(f"{passed} passed, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
