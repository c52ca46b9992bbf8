"""A worker in a process of its own, for the tests that kill it (SIGKILL)
or stop it (SIGTERM). Prints "started ID ATTEMPT PAYLOAD" when a handler
starts and "done ID" when it returns, flushed at once.

    python proc_worker.py CONNINFO QUEUE LEASE CONCURRENCY SHUTDOWN_TIMEOUT

A payload "hang" sleeps an hour, "slow" 30 s, "fast" 1 s, others not at all."""

import logging
import os
import sys
import time

import raquel_pg

conninfo, queue, lease, concurrency, shutdown_timeout = sys.argv[1:6]
SLEEP = {"hang": 3600, "slow": 30, "fast": 1}
logging.basicConfig(level=logging.INFO, stream=sys.stderr)


def say(line):
    os.write(1, f"{line}\n".encode())  # one write a line: handler threads' lines never interleave


def handle(job):
    say(f"started {job.id} {job.attempt} {job.payload}")
    time.sleep(SLEEP.get(job.payload, 0))
    say(f"done {job.id}")


worker = raquel_pg.Worker(conninfo, {queue: handle}, lease=float(lease), concurrency=int(concurrency),
                          shutdown_timeout=float(shutdown_timeout), name=f"proc-{queue}")
say("ready")
worker.run()
say("exited")
