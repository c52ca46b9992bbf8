"""raquel's Python side of the peers benchmark, system `raquel-example` of
peer.py (whose docstring lists what a system class provides). Its `work`
runs the Python worker example (examples/worker.py) in W processes, one
connection each, with a job's work that only traces and counts;
enqueueing is rq_enqueue / rq_enqueue_batch from one psycopg connection."""

import asyncio
import importlib.metadata
import importlib.util
import multiprocessing
import os
import pathlib
import signal
import sys
import time

import psycopg

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "worker.py"


class RaquelExample:
    def __init__(self):
        self.url = os.environ["PEER_URL"]

    def describe(self):
        with psycopg.connect(self.url) as conn:
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'raquel'").fetchone()
        return {
            "version": f"{row[0] if row else 'not installed'} (psycopg {importlib.metadata.version('psycopg')})",
            "settings": "examples/worker.py: one process and connection per worker; rq_complete_and_claim (the job "
            "in hand completed and the next claimed in one call and one transaction); an empty queue's claim waits "
            "(wait => 1 s), woken at the enqueue's commit; a finished job stays as a row with status success",
        }

    def run(self, coro):
        return asyncio.run(coro)

    def setup(self):
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS raquel")

    def producer(self):
        conn = psycopg.connect(self.url, autocommit=True)

        def one(seq):
            conn.execute("SELECT rq_enqueue('bench', %s)", (str(seq),), prepare=True)

        def many(seqs):
            conn.execute("SELECT count(*) FROM rq_enqueue_batch('bench', %s::text[])", ([str(s) for s in seqs],),
                         prepare=True)

        return one, many

    def fill(self, n):
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SELECT count(*) FROM rq_enqueue_batch('bench', ARRAY(SELECT i::text FROM generate_series(0, %s - 1) i))",
                         (n,))

    @staticmethod
    def worker(url, name, stats):
        """One worker process: the example's main loop with a traced, counted job."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the driver's handler
        spec = importlib.util.spec_from_file_location("worker_example", EXAMPLE)
        example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(example)

        def handle(payload):
            stats.start(payload)
            stats.done()

        example.handle = handle
        os.environ["RAQUEL_DSN"] = url
        sys.argv = ["worker.py", "bench", "--worker", name]
        example.main()

    def work(self, args, stats):
        context = multiprocessing.get_context("fork")
        procs = [context.Process(target=self.worker, args=(self.url, f"bench-{n}", stats), daemon=True)
                 for n in range(args.workers)]
        stats.on_exit = lambda: [p.kill() for p in procs]
        for p in procs:
            p.start()
        # Started once every worker's connection is waiting in, or running, its claim.
        with psycopg.connect(self.url, autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                               " AND query LIKE '%%rq_complete_and_claim%%' AND pid <> pg_backend_pid()").fetchone()[0] < args.workers:
                time.sleep(0.02)
        stats.ready()
        for p in procs:
            p.join()
