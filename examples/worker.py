"""A raquel worker in Python (psycopg 3).

Claims one job at a time from a queue and completes it in the same
transaction as its own work, so database-only work happens exactly once.
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
        while True:
            with conn.transaction():
                # With nothing ready, the claim waits up to a second for a
                # job to be committed (or fall due) before it returns none.
                job = conn.execute(
                    "SELECT id, attempts, payload FROM rq_claim(ARRAY[%s], worker => %s, wait => '1 second')",
                    (args.queue, args.worker),
                ).fetchone()
                if job is not None:
                    job_id, attempt, payload = job
                    try:
                        with conn.transaction():  # a savepoint: the work's writes go if it fails
                            handle(payload)
                        conn.execute("SELECT rq_complete(%s, attempt => %s)", (job_id, attempt))
                    except Exception as error:
                        conn.execute(
                            "SELECT rq_fail(%s, %s, %s, attempt => %s)",
                            (job_id, str(error), repr(error), attempt),
                        )
            if job is not None:
                idle_since = time.monotonic()
            elif args.idle_exit is not None and time.monotonic() - idle_since >= args.idle_exit:
                return


if __name__ == "__main__":
    main()
