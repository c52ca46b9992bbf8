"""raquel's Python driver for the peers benchmark (bench/peers/README.md has
the protocol), system `raquel-example` of peer.py. Its `work` runs the Python
worker example (examples/worker.py) in W processes, one connection each, with
a job's work that only traces and counts; enqueueing is rq_enqueue /
rq_enqueue_batch from one psycopg connection."""

import importlib.metadata
import importlib.util
import json
import multiprocessing
import os
import pathlib
import signal
import sys
import time

import psycopg

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "worker.py"


def now_us():
    return time.time_ns() // 1000


def describe(url, _args):
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'raquel'").fetchone()
    print(json.dumps({
        "version": f"{row[0] if row else 'not installed'} (psycopg {importlib.metadata.version('psycopg')})",
        "settings": "examples/worker.py: one process and connection per worker; rq_complete_and_claim (the job in "
                    "hand completed and the next claimed in one call and one transaction); an empty queue's claim "
                    "waits (wait => 1 s), woken at the enqueue's commit; a finished job stays as a row with status "
                    "success",
    }))


def setup(url, _args):
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS raquel")


def enqueue(url, args):
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        if args.batch <= 1:
            for seq in range(args.jobs):
                conn.execute("SELECT rq_enqueue('bench', %s)", (str(seq),), prepare=True)
        else:
            for first in range(0, args.jobs, args.batch):
                payloads = [str(seq) for seq in range(first, min(args.jobs, first + args.batch))]
                conn.execute("SELECT count(*) FROM rq_enqueue_batch('bench', %s::text[])", (payloads,), prepare=True)
        print(json.dumps({"jobs": args.jobs, "seconds": time.perf_counter() - started}))


def fill(url, args):
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT count(*) FROM rq_enqueue_batch('bench', ARRAY(SELECT i::text FROM generate_series(0, %s - 1) i))",
                     (args.jobs,))
    print(json.dumps({"jobs": args.jobs}))


def produce(url, args):
    jobs = int(args.rate * args.seconds)
    with psycopg.connect(url, autocommit=True) as conn, open(args.trace, "a", buffering=1) as trace:
        started = time.perf_counter()
        for seq in range(jobs):
            delay = started + seq / args.rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            conn.execute("SELECT rq_enqueue('bench', %s)", (str(seq),), prepare=True)
            trace.write(f"{seq} {now_us()}\n")
    print(json.dumps({"jobs": jobs}))


def run_example(url, name, trace_path, handled, first_start, last_end):
    """One worker process: the example's main loop with a traced, counted job."""
    spec = importlib.util.spec_from_file_location("worker_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    trace = open(trace_path, "a", buffering=1) if trace_path else None

    def handle(payload):
        started = now_us()
        with first_start.get_lock():
            if first_start.value == 0:
                first_start.value = started
        if trace:
            trace.write(f"{payload} {started}\n")
        ended = now_us()
        with handled.get_lock():
            handled.value += 1
            last_end.value = max(last_end.value, ended)

    example.handle = handle
    os.environ["RAQUEL_DSN"] = url
    sys.argv = ["worker.py", "bench", "--worker", name]
    example.main()


def work(url, args):
    context = multiprocessing.get_context("fork")
    handled = context.Value("q", 0)
    first_start = context.Value("q", 0)
    last_end = context.Value("q", 0)
    workers = [context.Process(target=run_example, args=(url, f"bench-{n}", args.trace, handled, first_start, last_end),
                               daemon=True) for n in range(args.workers)]
    for worker in workers:
        worker.start()

    def stop(*_):
        for worker in workers:
            worker.kill()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # Started once every worker's connection is waiting in, or running, its claim.
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                           " AND query LIKE '%%rq_complete_and_claim%%' AND pid <> pg_backend_pid()").fetchone()[0] < args.workers:
            time.sleep(0.02)
    print("ready", flush=True)
    while True:
        time.sleep(0.005)
        if args.expect is None:
            continue
        first = first_start.value
        out_of_time = first and args.max_seconds and now_us() - first > args.max_seconds * 1e6
        if handled.value >= args.expect or out_of_time:
            print(json.dumps({"jobs": handled.value, "seconds": (last_end.value - first) / 1e6}), flush=True)
            stop()


COMMANDS = {"describe": describe, "setup": setup, "enqueue": enqueue, "fill": fill, "produce": produce, "work": work}
