"""Enqueue-commit to claim-return latency, in ms: a waiting claim
(rq_claim(…, wait => …), woken at commit) against a worker that polls with
rq_claim every POLL_MS. Each trial times from just before the producer sends
its enqueue (which commits on its own) to the moment the worker has the job.
And complete-commit to await-return: AWAITERS sessions each wait for one job
with rq_await while a worker completes the jobs one at a time, each timed
from just before the worker sends its complete (which commits on its own) to
the moment its awaiter has the row. And durable wake-ups: SLEEPERS jobs put
to sleep (rq_sleep) until instants spread over 10 seconds, worked by 4
waiting claims, each timed from its instant to the moment a claim has it
(how late it woke), with the jobs lost (never claimed again) and doubled
(claimed twice); and PARKED jobs parked for an event each (rq_wait_event),
each timed from just before its emit (which commits on its own) to the
moment a claim has it. And a job's end to its awaiter's claim: JOB_WAITERS
jobs parked awaiting a child each (rq_wait_job), each timed from just before
its child's complete (which commits on its own) to the moment a claim has
the parent. And events emitted before their wait: EARLY events emitted and
made six days old (the retention is seven), then each read by a claimed
job's rq_wait_event, timed from send to return, with the waits that did not
return the payload at once. Prints one JSON object; RAQUEL_LATENCY_ONLY=durable
measures only the durable rows (sleeps, events, awaited jobs, early events)."""

import json
import os
import random
import threading
import time

import psycopg

DSN = os.environ["RAQUEL_BENCH_DSN"]
TRIALS = int(os.environ.get("RAQUEL_LATENCY_TRIALS", "200"))
POLL_MS = int(os.environ.get("RAQUEL_POLL_MS", "100"))
AWAITERS = int(os.environ.get("RAQUEL_AWAITERS", "40"))
SLEEPERS = int(os.environ.get("RAQUEL_SLEEPERS", "10000"))
PARKED = int(os.environ.get("RAQUEL_PARKED", "1000"))
JOB_WAITERS = int(os.environ.get("RAQUEL_JOB_WAITERS", "500"))
EARLY = int(os.environ.get("RAQUEL_EARLY_EVENTS", "500"))
ONLY = os.environ.get("RAQUEL_LATENCY_ONLY", "")


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def waiting_claims():
    worker = psycopg.connect(DSN, autocommit=True)
    producer = psycopg.connect(DSN, autocommit=True)
    latencies = []
    for _ in range(TRIALS):
        got = {}

        def claim():
            got["row"] = worker.execute(
                "SELECT id, attempts FROM rq_claim(ARRAY['latency'], wait => '10 s')").fetchone()
            got["at"] = time.perf_counter()

        thread = threading.Thread(target=claim)
        thread.start()
        time.sleep(0.02)  # let the claim fall asleep
        sent = time.perf_counter()
        producer.execute("SELECT rq_enqueue('latency', 'x')")
        thread.join()
        if got["row"] is None:
            raise SystemExit("a waiting claim timed out instead of being woken")
        latencies.append((got["at"] - sent) * 1000)
        producer.execute("SELECT rq_complete(%s, %s)", got["row"])
    return latencies


def polling_worker():
    worker = psycopg.connect(DSN, autocommit=True)
    producer = psycopg.connect(DSN, autocommit=True)
    claimed = threading.Event()
    stop = threading.Event()
    got = {}

    def poll():
        while not stop.is_set():
            row = worker.execute("SELECT id, attempts FROM rq_claim(ARRAY['polled'])").fetchone()
            if row is not None:
                got["at"] = time.perf_counter()
                worker.execute("SELECT rq_complete(%s, %s)", row)
                claimed.set()
            time.sleep(POLL_MS / 1000)

    thread = threading.Thread(target=poll)
    thread.start()
    latencies = []
    for _ in range(TRIALS):
        time.sleep(random.uniform(0, POLL_MS / 1000))  # not in step with the poller
        claimed.clear()
        sent = time.perf_counter()
        producer.execute("SELECT rq_enqueue('polled', 'x')")
        claimed.wait()
        latencies.append((got["at"] - sent) * 1000)
    stop.set()
    thread.join()
    return latencies


def awaiting_results():
    awaiters = [psycopg.connect(DSN, autocommit=True) for _ in range(AWAITERS)]
    worker = psycopg.connect(DSN, autocommit=True)
    latencies = []
    for _ in range(max(1, TRIALS // AWAITERS)):
        jobs = [worker.execute("SELECT id FROM rq_enqueue('awaited', 'x')").fetchone()[0] for _ in range(AWAITERS)]
        sent, returned = {}, {}

        def wait(n):
            row = awaiters[n].execute("SELECT status FROM rq_await(%s, '10 s')", [jobs[n]]).fetchone()
            returned[n] = time.perf_counter()
            if row[0] != "success":
                raise SystemExit(f"an awaiter returned {row[0]} instead of being woken by the complete")

        threads = [threading.Thread(target=wait, args=(n,)) for n in range(AWAITERS)]
        for t in threads:
            t.start()
        time.sleep(0.2)  # every awaiter asleep
        for _ in jobs:
            job, attempt = worker.execute("SELECT id, attempts FROM rq_claim(ARRAY['awaited'])").fetchone()
            sent[job] = time.perf_counter()
            worker.execute("SELECT rq_complete(%s, %s, '1')", [job, attempt])
        for t in threads:
            t.join()
        latencies += [(returned[n] - sent[jobs[n]]) * 1000 for n in range(AWAITERS)]
    return latencies


def park_all(conn, queue, n, park):
    """Enqueues n jobs into queue, claims them and parks each with `park`
    (SQL over u(id, a, n), the job's id, attempt and number, that returns
    `parked`)."""
    conn.execute("SELECT count(*) FROM rq_enqueue_batch(%s, ARRAY(SELECT n::text FROM generate_series(1, %s) n))", [queue, n])
    parked = 0
    while parked < n:
        rows = conn.execute("SELECT id, attempts, payload::int FROM rq_claim(ARRAY[%s], batch => 1000)", [queue]).fetchall()
        done = conn.execute(
            f"SELECT count(*) FILTER (WHERE p.parked) FROM unnest(%s::uuid[], %s::int[], %s::int[]) AS u(id, a, n),"
            f" LATERAL ({park}) p",
            [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]]).fetchone()[0]
        if done != len(rows):
            raise SystemExit(f"{len(rows) - done} of {len(rows)} jobs in {queue} did not park")
        parked += len(rows)


def drain(queue, n, limit_s):
    """Four waiting claims take queue's n jobs: when each job was claimed
    (wall clock, by the job's number), as often as it was."""
    claimed, lock = {}, threading.Lock()
    deadline = time.time() + limit_s

    def work():
        conn = psycopg.connect(DSN, autocommit=True)
        while time.time() < deadline:
            with lock:
                if len(claimed) >= n:
                    return
            rows = conn.execute(
                "SELECT id, attempts, payload::int FROM rq_claim(ARRAY[%s], batch => 20, wait => '200 ms')",
                [queue]).fetchall()
            now = time.time()
            with lock:
                for _, _, number in rows:
                    claimed.setdefault(number, []).append(now)
            if rows:
                conn.execute("SELECT count(*) FROM rq_complete_batch(%s::uuid[], %s::int[])",
                             [[r[0] for r in rows], [r[1] for r in rows]])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return claimed


def sleeping_wakeups():
    conn = psycopg.connect(DSN, autocommit=True)
    # the first instant after every job is asleep (parking takes about 1 ms a job)
    start = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8 + 5 + %s / 1000.0", [SLEEPERS]).fetchone()[0]
    park_all(conn, "sleepy", SLEEPERS,
             f"SELECT rq_sleep(u.id, u.a, 'nap', at => to_timestamp({start} + 10.0 * u.n / {SLEEPERS})) AS parked")
    claimed = drain("sleepy", SLEEPERS, start + 40 - time.time())
    late = [(times[0] - (start + 10.0 * n / SLEEPERS)) * 1000 for n, times in claimed.items()]
    early = sum(1 for ms in late if ms < -1)
    if early:
        raise SystemExit(f"{early} sleeping jobs were claimed before their instant")
    return late, SLEEPERS - len(claimed), sum(1 for times in claimed.values() if len(times) > 1)


def fire_and_drain(queue, n, fire):
    """Calls fire(conn, k) for k = 1 … n on a connection of its own, one
    every 2 ms, while four waiting claims take queue's n parked jobs: how
    late each was claimed after its fire was sent (ms), the jobs lost and
    doubled, and those claimed before it was sent."""
    sent = {}

    def send():
        sender = psycopg.connect(DSN, autocommit=True)
        time.sleep(0.5)
        for k in range(1, n + 1):
            sent[k] = time.time()
            fire(sender, k)
            time.sleep(0.002)

    sender = threading.Thread(target=send)
    sender.start()
    claimed = drain(queue, n, 30)
    sender.join()
    late = [(times[0] - sent[k]) * 1000 for k, times in claimed.items()]
    early = sum(1 for k, times in claimed.items() if times[0] < sent[k])
    return late, n - len(claimed), sum(1 for times in claimed.values() if len(times) > 1), early


def event_wakeups():
    conn = psycopg.connect(DSN, autocommit=True)
    park_all(conn, "parked", PARKED, "SELECT parked FROM rq_wait_event(u.id, u.a, 'w', 'ev-' || u.n)")
    late, lost, doubled, _ = fire_and_drain("parked", PARKED, lambda c, k: c.execute("SELECT rq_emit(%s)", [f"ev-{k}"]))
    return late, lost, doubled


def job_end_wakeups():
    """JOB_WAITERS parents, each parked awaiting a child of its own
    (rq_wait_job) while the children are claimed; the children completed
    one at a time; four waiting claims take the parents."""
    conn = psycopg.connect(DSN, autocommit=True)
    conn.execute("SELECT count(*) FROM rq_enqueue_batch('children', ARRAY(SELECT n::text FROM generate_series(1, %s) n))",
                 [JOB_WAITERS])
    children = {}
    while len(children) < JOB_WAITERS:
        for job, attempt, number in conn.execute(
                "SELECT id, attempts, payload::int FROM rq_claim(ARRAY['children'], batch => 1000)").fetchall():
            children[number] = (job, attempt)
    park_all(conn, "awaiting", JOB_WAITERS,
             "SELECT parked FROM rq_wait_job(u.id, u.a, 'child',"
             " (SELECT c.id FROM jobs c WHERE c.queue = 'children' AND c.payload = u.n::text))")
    late, lost, doubled, early = fire_and_drain(
        "awaiting", JOB_WAITERS, lambda c, k: c.execute("SELECT rq_complete(%s, %s, '1')", children[k]))
    if early:
        raise SystemExit(f"{early} awaiting jobs were claimed before their child ended")
    return late, lost, doubled


def early_events():
    """EARLY events emitted, then made six days old (the retention is
    seven); then EARLY claimed jobs wait for one each: each wait timed, and
    the waits that did not return the payload at once counted."""
    conn = psycopg.connect(DSN, autocommit=True)
    conn.execute("SELECT count(rq_emit('early-' || n, jsonb_build_object('n', n))) FROM generate_series(1, %s) n", [EARLY])
    conn.execute("UPDATE emitted_events SET emitted_at = emitted_at - 6 * 86400000, kept_until = kept_until - 6 * 86400000"
                 " WHERE name LIKE 'early-%'")
    conn.execute("SELECT count(*) FROM rq_enqueue_batch('early', ARRAY(SELECT n::text FROM generate_series(1, %s) n))", [EARLY])
    jobs = conn.execute("SELECT id, attempts, payload::int FROM rq_claim(ARRAY['early'], batch => %s)", [EARLY]).fetchall()
    latencies, missed = [], 0
    for job, attempt, number in jobs:
        sent = time.perf_counter()
        parked, payload = conn.execute("SELECT parked, payload FROM rq_wait_event(%s, %s, 'w', %s)",
                                       [job, attempt, f"early-{number}"]).fetchone()
        latencies.append((time.perf_counter() - sent) * 1000)
        if parked or payload != {"n": number}:
            missed += 1
        conn.execute("SELECT rq_complete(%s, %s)", [job, attempt])
    return latencies, EARLY - len(jobs) + missed


def main():
    result = {}
    if ONLY != "durable":
        waited = waiting_claims()
        polled = polling_worker()
        awaited = awaiting_results()
        result.update({
            "trials": TRIALS,
            "poll_ms": POLL_MS,
            "awaiters": AWAITERS,
            "wait_p50": percentile(waited, 50), "wait_p99": percentile(waited, 99),
            "poll_p50": percentile(polled, 50), "poll_p99": percentile(polled, 99),
            "await_p50": percentile(awaited, 50), "await_p99": percentile(awaited, 99),
        })
    slept, sleep_lost, sleep_doubled = sleeping_wakeups()
    woken, event_lost, event_doubled = event_wakeups()
    ended, job_lost, job_doubled = job_end_wakeups()
    read, early_missed = early_events()
    print(json.dumps({
        **result,
        "sleepers": SLEEPERS,
        "sleep_late_p50": percentile(slept, 50), "sleep_late_p99": percentile(slept, 99),
        "sleep_lost": sleep_lost, "sleep_doubled": sleep_doubled,
        "parked": PARKED,
        "event_p50": percentile(woken, 50), "event_p99": percentile(woken, 99),
        "event_lost": event_lost, "event_doubled": event_doubled,
        "job_waiters": JOB_WAITERS,
        "job_p50": percentile(ended, 50), "job_p99": percentile(ended, 99),
        "job_lost": job_lost, "job_doubled": job_doubled,
        "early": EARLY,
        "early_p50": percentile(read, 50), "early_p99": percentile(read, 99),
        "early_missed": early_missed,
    }))


if __name__ == "__main__":
    main()
