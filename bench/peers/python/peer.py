"""The peers-benchmark driver for the Python queues from PyPI.

    PEER_URL=postgresql://postgres@127.0.0.1:54330/peer_x \
        python bench/peers/python/peer.py SYSTEM COMMAND [OPTIONS]

SYSTEM: pgqueuer, procrastinate, raquel-py (the PyPI library raquel),
raquel-example (the repository's examples/worker.py) or raquel-pg-py (the
repository's Python library, libraries/python).
The protocol (commands, options, output) is bench/peers/README.md's. Each
system is a class in SYSTEMS below; a new system is one more class and entry:
  describe() -> {"version", "settings"}; run(coro) runs main_async's
  coroutine (the event loop the system's CLI uses); setup(); producer() ->
  (one(seq), many(seqs) or None), sync or async, on one connection; fill(n)
  optional (default: many() in chunks); has_batch = False where there is no
  batch call; work(args, stats): the runtime, calling stats.start(seq) and
  stats.done() around each job and stats.ready() once it has started.
"""

import argparse
import asyncio
import inspect
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from importlib.metadata import version

from raquel_example import RaquelExample

URL = os.environ.get("PEER_URL", "")
QUEUE = "bench"
FILL_CHUNK = 5000  # jobs per batch call in `fill`


def now_us():
    return time.time_ns() // 1000


def open_trace(path):
    # O_APPEND: each line is one write(2) at the end of the file, so lines
    # from several processes never interleave and nothing waits in a buffer.
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else None


async def call(fn, *args):
    """Calls a sync or an async function alike."""
    result = fn(*args)
    return await result if inspect.isawaitable(result) else result


class Stats:
    """What `work` counts: handler starts (traced) and returns, in shared
    memory so that forked worker processes count into the same place. A
    thread of the main process reports and exits once --expect is met or
    --max-seconds have passed since the first start."""

    HANDLED, FIRST, LAST, READY = range(4)

    def __init__(self, args, on_exit=lambda: None):
        self.args, self.on_exit = args, on_exit
        self.trace = open_trace(args.trace)
        self.lock = multiprocessing.Lock()
        self.v = multiprocessing.RawArray("q", 4)
        self.said_ready = False

    def start(self, seq):
        t = now_us()
        if self.trace is not None:
            os.write(self.trace, f"{seq} {t}\n".encode())
        if self.v[self.FIRST] == 0:
            with self.lock:
                if self.v[self.FIRST] == 0:
                    self.v[self.FIRST] = t

    def done(self):
        t = now_us()
        with self.lock:
            self.v[self.HANDLED] += 1
            self.v[self.LAST] = max(self.v[self.LAST], t)

    def ready(self):
        if not self.said_ready:
            self.said_ready = True
            print("ready", flush=True)
            if self.args.expect is not None:
                threading.Thread(target=self.watch, daemon=True).start()

    def watch(self):
        limit = (self.args.max_seconds or float("inf")) * 1e6
        while True:
            time.sleep(0.005)
            handled, first = self.v[self.HANDLED], self.v[self.FIRST]
            if handled >= self.args.expect or (first and now_us() - first >= limit):
                seconds = (self.v[self.LAST] - first) / 1e6 if handled else 0.0
                print(json.dumps({"jobs": handled, "seconds": seconds}), flush=True)
                self.on_exit()
                os._exit(0)


# --- pgqueuer ---------------------------------------------------------------


class Pgqueuer:
    """PgQueuer's own runtime (PgQueuer + an entrypoint), on asyncpg, in a
    uvloop loop as its `pgq run` CLI does."""

    @staticmethod
    def limits(workers):
        """(entrypoint concurrency_limit, run() kwargs) for W jobs at once.

        run(max_concurrent_tasks=W) is its per-worker cap, but it must be at
        least twice batch_size, so batch_size is W // 2 and W = 1 takes the
        entrypoint's concurrency_limit=1 (its "serialized processing")
        instead. batch_size also sizes the buffer of finished jobs (flushed
        when full, or every 0.1 s), and a finished job holds its slot until
        that flush, so a batch larger than that would idle the slots.
        Measured (first 10 s of a 20 000-job backlog, W = 4): this ~900
        jobs/s; concurrency_limit=4 with batch_size 1, 2, 4: ~350, ~700, ~650."""
        if workers == 1:
            return 1, {"batch_size": 1}
        return 0, {"batch_size": workers // 2, "max_concurrent_tasks": workers}

    def describe(self):
        return {
            "version": version("pgqueuer"),
            "settings": "PgQueuer.run on one asyncpg connection (LISTEN/NOTIFY on ch_pgqueuer, dequeue "
            "and completion all on it, as its docs advise for a QueueManager); W >= 2: run(max_concurrent_tasks=W, "
            "batch_size=W//2 (its floor: max_concurrent_tasks >= 2 x batch_size)); W = 1: entrypoint "
            "concurrency_limit=1, batch_size=1; finished jobs buffered and flushed when batch_size of them "
            "are done or every 0.1 s (DELETE from pgqueuer + INSERT into pgqueuer_log); dequeue_timeout 30 s "
            "polling fallback (default); durable tables (default); uvloop as `pgq run`; "
            f"asyncpg {version('asyncpg')}",
        }

    def run(self, coro):
        import uvloop

        return uvloop.run(coro)

    async def queries(self, cls=None):
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        return (cls or Queries)(AsyncpgDriver(await asyncpg.connect(URL)))

    async def setup(self):
        q = await self.queries()
        if not await q.schema_is_installed():  # what `pgq install` does
            await q.install()

    async def producer(self):
        q = await self.queries()
        payload = lambda seq: json.dumps({"seq": seq}).encode()

        async def one(seq):
            await q.enqueue(QUEUE, payload(seq))

        async def many(seqs):  # lists = its batch insert
            await q.enqueue([QUEUE] * len(seqs), [payload(s) for s in seqs], [0] * len(seqs))

        return one, many

    async def work(self, args, stats):
        from pgqueuer import PgQueuer
        from pgqueuer.queries import Queries

        class ReadyQueries(Queries):
            # Its first dequeue comes after its LISTEN: the runtime has started.
            async def dequeue(self, *a, **kw):
                stats.ready()
                return await super().dequeue(*a, **kw)

        q = await self.queries(ReadyQueries)
        pgq = PgQueuer(q.driver, queries=q)

        limit, run_kwargs = self.limits(args.workers)

        @pgq.entrypoint(QUEUE, concurrency_limit=limit)
        async def handle(job):
            stats.start(json.loads(job.payload)["seq"])
            stats.done()

        await pgq.run(**run_kwargs)


# --- procrastinate ----------------------------------------------------------


class Procrastinate:
    """Procrastinate's own worker (App.run_worker_async), psycopg 3 pool."""

    stats = None  # set by work(); the task only runs there

    def describe(self):
        return {
            "version": version("procrastinate"),
            "settings": "App.run_worker_async(queues=['bench'], concurrency=W, listen_notify=True, "
            "fetch_job_polling_interval=5 s fallback (default)); PsycopgConnector pool min_size=max_size=W+1 "
            "(its docs: concurrency plus one for short jobs) plus its own LISTEN connection; finished "
            "jobs kept with status 'succeeded' (delete_jobs='never', default); asyncio as its CLI; "
            f"psycopg {version('psycopg')}",
        }

    def run(self, coro):
        return asyncio.run(coro)

    def app(self, pool_size, connector_cls=None):
        import logging

        import procrastinate

        # Its warning that the App lives in __main__ is for its CLI, which
        # imports the App by path; this driver runs the worker in-process.
        logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)
        cls = connector_cls or procrastinate.PsycopgConnector
        app = procrastinate.App(connector=cls(conninfo=URL, min_size=pool_size, max_size=pool_size))

        @app.task(name=QUEUE, queue=QUEUE)
        async def bench(seq):
            self.stats.start(seq)
            self.stats.done()

        self.task = bench
        return app

    async def setup(self):
        async with self.app(1).open_async() as app:
            await app.schema_manager.apply_schema_async()

    async def producer(self):
        app = self.app(1)  # one connection
        await app.open_async()

        async def one(seq):
            await self.task.defer_async(seq=seq)

        async def many(seqs):
            await self.task.batch_defer_async(*({"seq": s} for s in seqs))

        return one, many

    async def work(self, args, stats):
        import procrastinate

        class ReadyConnector(procrastinate.PsycopgConnector):
            # Called right after the worker's LISTEN (private, but pinned).
            async def _loop_notify(self, *a, **kw):
                stats.ready()
                return await super()._loop_notify(*a, **kw)

        self.stats = stats
        async with self.app(args.workers + 1, ReadyConnector).open_async() as app:
            await app.run_worker_async(
                queues=[QUEUE], concurrency=args.workers, listen_notify=True, install_signal_handlers=False
            )


# --- raquel (PyPI) ----------------------------------------------------------


class RaquelPy:
    """The PyPI library raquel: no runtime with concurrency, so W processes
    each loop over Raquel.dequeue as its README shows, sleeping when the
    queue is empty (it has no LISTEN)."""

    POLL = 0.1  # seconds between polls of an empty queue (its examples: 1 s)
    has_batch = False

    def describe(self):
        return {
            "version": version("raquel"),
            "settings": f"W processes, each looping `with Raquel.dequeue('bench', expire=False)` and sleeping "
            f"{int(self.POLL * 1000)} ms when it finds no job (polling, no LISTEN); expire=False skips the "
            "UPDATE of expired jobs it otherwise runs before every claim (these jobs have no max_age); each "
            "job: a claim transaction then a lock-and-complete transaction; finished jobs kept with status "
            f"'success'; SQLAlchemy {version('sqlalchemy')} + psycopg {version('psycopg')}",
        }

    def run(self, coro):
        return asyncio.run(coro)

    def raquel(self):
        from raquel import Raquel

        rq = Raquel(URL.replace("postgresql://", "postgresql+psycopg://", 1), pool_size=1)
        with rq.engine.connect():  # connect now, not in the first timed call
            pass
        return rq

    def setup(self):
        self.raquel().create_all()

    def producer(self):
        rq = self.raquel()
        return (lambda seq: rq.enqueue(QUEUE, {"seq": seq})), None

    def fill(self, n):
        # No batch call: the README's plain INSERT, with enqueue()'s defaults.
        rq = self.raquel()
        with rq.engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO jobs (id, queue, payload, status, min_retry_delay, max_retry_delay, backoff_base,"
                " enqueued_at, scheduled_at, attempts)"
                " SELECT gen_random_uuid(), %(q)s, format('{\"seq\": %%s}', g), 'queued', 1000, 43200000, 1000,"
                " t.ms, t.ms, 0"
                " FROM generate_series(0, %(n)s - 1) g, (SELECT (extract(epoch FROM now()) * 1000)::bigint ms) t",
                {"q": QUEUE, "n": n},
            )

    @staticmethod
    def worker(stats, index, parent):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the driver's handler
        rq = RaquelPy().raquel()
        with stats.lock:
            stats.v[stats.READY] += 1
        while True:
            with rq.dequeue(QUEUE, claim_as=f"peer-{index}", expire=False) as job:
                if job is not None:
                    stats.start(job.payload["seq"])
            if job is not None:
                stats.done()  # counted once dequeue() has recorded it
            elif os.getppid() != parent:
                os._exit(0)  # the driver is gone
            else:
                time.sleep(RaquelPy.POLL)

    def work(self, args, stats):
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=self.worker, args=(stats, i, os.getpid()), daemon=True) for i in range(args.workers)]
        stats.on_exit = lambda: [p.kill() for p in procs]
        for p in procs:
            p.start()
        while stats.v[stats.READY] < args.workers:
            time.sleep(0.01)
        stats.ready()
        for p in procs:
            p.join()


class RaquelPg:
    """raquel's own Python library (libraries/python, `raquel-pg`, import
    raquel_pg), installed into the peers venv from this repository: W
    processes, each a raquel_pg.Worker (sync, threads) with CONCURRENCY
    handler slots."""

    CONCURRENCY = 10  # handler slots per worker process (the "4 workers x 10 concurrency")

    def __init__(self):
        self.url = URL

    def describe(self):
        import psycopg

        with psycopg.connect(self.url) as conn:
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'raquel'").fetchone()
        return {
            "version": f"{version('raquel-pg')} on raquel {row[0] if row else 'not installed'} (psycopg {version('psycopg')})",
            "settings": f"W processes, each a raquel_pg.Worker (sync) with concurrency {self.CONCURRENCY} (handler "
            "threads): one connection's waiting claim (rq_claim, wait => 5 s, woken at the enqueue's commit) for "
            "free slots, one connection sending the finished jobs' completions together with the claim of as many "
            "next jobs (rq_complete_batch_and_claim, one round trip a batch; a completion waits at most 10 ms), "
            "leases of 30 s extended every 10 s; a finished job stays as a row with status success",
        }

    def run(self, coro):
        return asyncio.run(coro)

    def setup(self):
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS raquel")

    def producer(self):
        import psycopg
        import raquel_pg

        conn = psycopg.connect(self.url, autocommit=True)
        return (lambda seq: raquel_pg.enqueue(conn, QUEUE, str(seq))), \
            (lambda seqs: raquel_pg.enqueue_batch(conn, QUEUE, [str(s) for s in seqs]))

    @staticmethod
    def worker(url, index, stats):
        import raquel_pg

        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the driver's handler

        def handle(job):
            stats.start(int(job.payload))
            stats.done()

        raquel_pg.Worker(url, {QUEUE: handle}, concurrency=RaquelPg.CONCURRENCY, name=f"bench-{index}",
                         connect_kwargs={"application_name": "raquel-pg-bench"}).run()

    def work(self, args, stats):
        import psycopg

        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=self.worker, args=(self.url, i, stats), daemon=True) for i in range(args.workers)]
        stats.on_exit = lambda: [p.kill() for p in procs]
        for p in procs:
            p.start()
        # Started once every process's claiming connection has sent its first claim.
        with psycopg.connect(self.url, autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'raquel-pg-bench'"
                               " AND query LIKE '%%rq_claim(%%'").fetchone()[0] < args.workers:
                time.sleep(0.02)
        stats.ready()
        for p in procs:
            p.join()


SYSTEMS = {
    "pgqueuer": Pgqueuer,
    "procrastinate": Procrastinate,
    "raquel-py": RaquelPy,
    # The repository's examples/worker.py (raquel_example.py, beside this file).
    "raquel-example": RaquelExample,
    # The repository's Python library (libraries/python), as its README shows.
    "raquel-pg-py": RaquelPg,
}


async def main_async(system, args):
    if args.command == "setup":
        await call(system.setup)
    elif args.command == "enqueue":
        one, many = await call(system.producer)
        started = time.perf_counter()
        if args.batch == 1:
            for seq in range(args.jobs):
                await call(one, seq)
        else:
            for first in range(0, args.jobs, args.batch):
                await call(many, list(range(first, min(first + args.batch, args.jobs))))
        print(json.dumps({"jobs": args.jobs, "seconds": time.perf_counter() - started}))
    elif args.command == "fill":
        if hasattr(system, "fill"):
            await call(system.fill, args.jobs)
        else:
            _, many = await call(system.producer)
            for first in range(0, args.jobs, FILL_CHUNK):
                await call(many, list(range(first, min(first + FILL_CHUNK, args.jobs))))
        print(json.dumps({"jobs": args.jobs}))
    elif args.command == "produce":
        one, _ = await call(system.producer)
        trace, n = open_trace(args.trace), int(args.rate * args.seconds)
        start = time.monotonic()
        for seq in range(n):
            delay = start + seq / args.rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await call(one, seq)
            os.write(trace, f"{seq} {now_us()}\n".encode())
        print(json.dumps({"jobs": n}))
    elif args.command == "work":
        stats = Stats(args)
        # SIGTERM: stop at once (no graceful drain), worker processes too.
        signal.signal(signal.SIGTERM, lambda *_: (stats.on_exit(), os._exit(0)))
        await call(system.work, args, stats)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("system")
    parser.add_argument("command", choices=["describe", "setup", "enqueue", "fill", "produce", "work"])
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rate", type=float)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--trace")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--expect", type=int)
    parser.add_argument("--max-seconds", type=float)
    args = parser.parse_args()
    if SYSTEMS.get(args.system) is None:
        known = ", ".join(SYSTEMS)
        sys.exit(f"system {args.system!r} is not in this driver (it has {known})")
    system = SYSTEMS[args.system]()
    if args.command == "describe":
        print(json.dumps(system.describe()))
    elif args.command == "enqueue" and args.batch > 1 and not getattr(system, "has_batch", True):
        print("no batch call", file=sys.stderr)
        sys.exit(3)
    else:
        system.run(main_async(system, args))


if __name__ == "__main__":
    main()
