"""A raquel worker in Python (psycopg 3).

Works one job at a time from a queue, one round trip a job: each
transaction does the job in hand's work, then completes it (or fails it)
and claims the next in one call (rq_complete_and_claim), so database-only
work commits exactly once, with its completion.
When the queue is empty its claim waits (no polling) until an enqueue
commits or a scheduled job falls due.

    RAQUEL_DSN="host=/tmp/raquel-dev port=54320 user=postgres dbname=raquel" \
        python examples/worker.py emails

Options: --worker NAME (claimed_by), --idle-exit SECONDS (stop after that
long without work; default: run forever).
"""

import argparse
import os
import time

import psycopg


def handle(payload):
    """The job's work. Here: refuse payloads that say so, accept the rest."""
    if payload == "fail":
        raise RuntimeError("this payload always fails")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("queue")
    parser.add_argument("--worker", default=f"python-{os.getpid()}")
    parser.add_argument("--idle-exit", type=float, default=None)
    args = parser.parse_args()
    dsn = os.environ["RAQUEL_DSN"]

    with psycopg.connect(dsn) as conn:
        idle_since = time.monotonic()
        job = None  # the job in hand: (id, attempt, payload)
        while True:
            # One transaction, one round trip a job: the work of the job in
            # hand, then its completion (or failure) and the claim of the
            # next. With nothing ready, the claim waits up to a second for a
            # job to be committed (or fall due) before it returns none.
            with conn.transaction():
                if job is None:
                    job = conn.execute(
                        "SELECT id, attempts, payload FROM rq_complete_and_claim(NULL, NULL, ARRAY[%s], %s,"
                        " wait => '1 second')",
                        (args.queue, args.worker),
                    ).fetchone()
                else:
                    job_id, attempt, payload = job
                    try:
                        with conn.transaction():  # a savepoint: the work's writes go if it fails
                            handle(payload)
                        job = conn.execute(
                            "SELECT id, attempts, payload FROM rq_complete_and_claim(%s, %s, ARRAY[%s], %s,"
                            " wait => '1 second')",
                            (job_id, attempt, args.queue, args.worker),
                        ).fetchone()
                    except Exception as error:
                        job = conn.execute(
                            "SELECT id, attempts, payload FROM rq_fail_and_claim(%s, %s, %s, %s, ARRAY[%s], %s,"
                            " wait => '1 second')",
                            (job_id, attempt, str(error), repr(error), args.queue, args.worker),
                        ).fetchone()
            if job is not None:
                idle_since = time.monotonic()
            elif args.idle_exit is not None and time.monotonic() - idle_since >= args.idle_exit:
                return


if __name__ == "__main__":
    main()
