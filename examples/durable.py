"""A durable function in Python (psycopg 3): an order's life as one raquel job.

Each order job runs five steps, and any attempt, after an error or after
its worker was killed, goes on where the last one stopped:

1. "reserve": inserts the order's reservation and records the step in the
   same transaction (exactly once);
2. "cool-off": sleeps a moment (rq_sleep), holding no worker and no lease;
3. "payment": waits until the event 'paid:<order>' is emitted (rq_wait_event),
   and reads its payload;
4. "pack": enqueues a child job in the queue <queue>-packing, recording its
   id as a step in the same transaction, and waits for it (rq_wait_job);
   this worker packs too: a packing job writes its packing and completes
   with the box, in one transaction;
5. "ship": inserts the shipment with the paid amount, records the step and
   completes the job with a result, in one transaction.

The job's claim is a lease: a worker killed mid-job loses it, the
background worker hands the job out again when the lease runs out, and the
next attempt reads the steps recorded and skips them. A step's effect that
is a write to this database commits with its record, so it happens once.

    RAQUEL_DSN="host=/tmp/raquel-dev port=54320 user=postgres dbname=raquel" \
        python examples/durable.py orders

The tables it writes (reservations, packings, shipments) are made if missing. Prints
one line a step done ("<order> <step>"), for whoever watches. Options:
--lease (default 5 seconds), --cool-off (default 1 second), --idle-exit
SECONDS (stop after that long without work; default: run forever).
"""

import argparse
import os
import sys
import time

import psycopg
from psycopg.types.json import Jsonb

TABLES = """
CREATE TABLE IF NOT EXISTS reservations (order_id text PRIMARY KEY, job_id uuid NOT NULL);
CREATE TABLE IF NOT EXISTS packings (order_id text PRIMARY KEY, job_id uuid NOT NULL);
CREATE TABLE IF NOT EXISTS shipments (order_id text PRIMARY KEY, amount numeric NOT NULL);
"""


class Parked(Exception):
    """The job sleeps or waits: this attempt ends here."""


def run(conn, queue, job_id, attempt, order, cool_off):
    """One attempt of the order's durable function, from its start."""
    done = dict(conn.execute("SELECT name, result FROM job_steps WHERE job_id = %s", [job_id]).fetchall())

    def step(name, work):
        # a step's own writes and its record commit together, or neither
        if name in done:
            return done[name]
        with conn.transaction():
            result = work()
            conn.execute("SELECT rq_step(%s, %s, %s, %s)", [job_id, attempt, name, Jsonb(result)])
        print(f"{order} {name}", flush=True)
        return result

    step("reserve", lambda: conn.execute(
        "INSERT INTO reservations VALUES (%s, %s) RETURNING order_id", [order, job_id]).fetchone()[0])

    with conn.transaction():
        sleeping = conn.execute(
            "SELECT rq_sleep(%s, %s, 'cool-off', delay => %s::interval)",
            [job_id, attempt, f"{cool_off} seconds"]).fetchone()[0]
    if sleeping:
        raise Parked()

    with conn.transaction():
        parked, paid, _timed_out = conn.execute(
            "SELECT parked, payload, timed_out FROM rq_wait_event(%s, %s, 'payment', %s)",
            [job_id, attempt, f"paid:{order}"]).fetchone()
    if parked:
        raise Parked()

    child = step("pack-job", lambda: str(conn.execute(
        "SELECT id FROM rq_enqueue(%s::text, %s::text)", [f"{queue}-packing", order]).fetchone()[0]))
    with conn.transaction():
        parked, status, packed, _error, _timed_out = conn.execute(
            "SELECT parked, status, result, error, timed_out FROM rq_wait_job(%s, %s, 'packed', %s)",
            [job_id, attempt, child]).fetchone()
    if parked:
        raise Parked()
    if status != "success":
        raise RuntimeError(f"packing job {child} ended {status}")

    with conn.transaction():
        conn.execute("INSERT INTO shipments VALUES (%s, %s)", [order, paid["amount"]])
        conn.execute("SELECT rq_step(%s, %s, 'ship')", [job_id, attempt])
        conn.execute("SELECT rq_complete(%s, %s, %s)", [job_id, attempt, Jsonb({"shipped": order, "box": packed["box"]})])
    print(f"{order} ship", flush=True)


def pack(conn, job_id, attempt, order):
    """A packing job: its packing written and the job completed, in one transaction."""
    with conn.transaction():
        conn.execute("INSERT INTO packings VALUES (%s, %s)", [order, job_id])
        conn.execute("SELECT rq_complete(%s, %s, %s)", [job_id, attempt, Jsonb({"box": f"B-{order}"})])
    print(f"{order} packed", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("queue")
    parser.add_argument("--worker", default=f"python-durable-{os.getpid()}")
    parser.add_argument("--lease", type=float, default=5.0)
    parser.add_argument("--cool-off", type=float, default=1.0)
    parser.add_argument("--idle-exit", type=float, default=None)
    args = parser.parse_args()

    with psycopg.connect(os.environ["RAQUEL_DSN"], autocommit=True) as conn:
        conn.execute(TABLES)
        idle_since = time.monotonic()
        while True:
            job = conn.execute(
                "SELECT id, attempts, payload, queue FROM rq_claim(ARRAY[%s, %s], worker => %s,"
                " lease => %s::interval, wait => '1 second')",
                [args.queue, f"{args.queue}-packing", args.worker, f"{args.lease} seconds"]).fetchone()
            if job is None:
                if args.idle_exit is not None and time.monotonic() - idle_since >= args.idle_exit:
                    return
                continue
            idle_since = time.monotonic()
            job_id, attempt, order, queue = job
            try:
                if queue == args.queue:
                    run(conn, queue, job_id, attempt, order, args.cool_off)
                else:
                    pack(conn, job_id, attempt, order)
            except Parked:
                pass
            except Exception as error:  # the attempt failed: retried after the backoff
                print(f"{order} failed: {error}", file=sys.stderr, flush=True)
                conn.execute("SELECT rq_fail(%s, %s, %s)", [job_id, attempt, str(error)])


if __name__ == "__main__":
    main()
