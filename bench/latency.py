"""Enqueue-commit to claim-return latency, in ms: a waiting claim
(rq_claim(…, wait => …), woken at commit) against a worker that polls with
rq_claim every POLL_MS. Each trial times from just before the producer sends
its enqueue (which commits on its own) to the moment the worker has the job.
And complete-commit to await-return: AWAITERS sessions each wait for one job
with rq_await while a worker completes the jobs one at a time, each timed
from just before the worker sends its complete (which commits on its own) to
the moment its awaiter has the row. Prints one JSON object."""

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
                "SELECT id FROM rq_claim(ARRAY['latency'], wait => '10 s')").fetchone()
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
        producer.execute("SELECT rq_complete(%s)", got["row"])
    return latencies


def polling_worker():
    worker = psycopg.connect(DSN, autocommit=True)
    producer = psycopg.connect(DSN, autocommit=True)
    claimed = threading.Event()
    stop = threading.Event()
    got = {}

    def poll():
        while not stop.is_set():
            row = worker.execute("SELECT id FROM rq_claim(ARRAY['polled'])").fetchone()
            if row is not None:
                got["at"] = time.perf_counter()
                worker.execute("SELECT rq_complete(%s)", row)
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


def main():
    waited = waiting_claims()
    polled = polling_worker()
    awaited = awaiting_results()
    print(json.dumps({
        "trials": TRIALS,
        "poll_ms": POLL_MS,
        "awaiters": AWAITERS,
        "wait_p50": percentile(waited, 50), "wait_p99": percentile(waited, 99),
        "poll_p50": percentile(polled, 50), "poll_p99": percentile(polled, 99),
        "await_p50": percentile(awaited, 50), "await_p99": percentile(awaited, 99),
    }))


if __name__ == "__main__":
    main()
