"""The Python library raquel (PyPI), on its own table in its own database, as
users run it today: enqueue jobs one at a time with Raquel.enqueue, then
worker processes take them with Raquel.dequeue until the queue is empty.
Prints one JSON object of jobs/s figures."""

import json
import multiprocessing
import os
import sys
import time

from raquel import Raquel

URL = os.environ["RAQUEL_PY_URL"]
JOBS = int(os.environ.get("RAQUEL_PY_JOBS", "2000"))


def drain(_):
    rq = Raquel(URL)
    done = 0
    while True:
        with rq.dequeue("bench", claim_as=f"w{os.getpid()}") as job:
            if job is None:
                return done
            done += 1


def run(workers):
    rq = Raquel(URL)
    with rq.engine.begin() as conn:
        conn.exec_driver_sql("TRUNCATE jobs")
    started = time.perf_counter()
    for _ in range(JOBS):
        rq.enqueue("bench", "payload")
    enqueued_per_s = JOBS / (time.perf_counter() - started)
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        done = sum(pool.map(drain, range(workers)))
    if done != JOBS:
        sys.exit(f"raquel (Python) handled {done} of {JOBS} jobs")
    return enqueued_per_s, done / (time.perf_counter() - started)


def main():
    Raquel(URL).create_all()
    enqueue_1, claim_1 = run(1)
    _, claim_4 = run(4)
    print(json.dumps({"enqueue_1": enqueue_1, "claim_complete_1": claim_1, "claim_complete_4": claim_4}))


if __name__ == "__main__":
    main()
