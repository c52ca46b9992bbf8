"""The peers benchmark's orchestrator (bench/peers/README.md): runs every
system's driver against one PostgreSQL server, each measurement in a fresh
database, and writes bench/results/peers.md. Started by `bench/run --peers`,
which installs the drivers and starts the server; standard library only.

Environment: PEER_HOST, PEER_PORT (the server), RAQUEL_PEERS_ROUNDS (3),
RAQUEL_PEERS_SYSTEMS (a comma-separated subset), RAQUEL_PEERS_DRAIN_JOBS
(100000), RAQUEL_PEERS_DRAIN_SECONDS (30: a drain stops after that long and
is measured on the jobs done by then), RAQUEL_PEERS_LATENCY_SECONDS (10)."""

import datetime
import json
import os
import pathlib
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOST = os.environ.get("PEER_HOST", "127.0.0.1")
PORT = os.environ["PEER_PORT"]
ROUNDS = int(os.environ.get("RAQUEL_PEERS_ROUNDS", "3"))
DRAIN_JOBS = int(os.environ.get("RAQUEL_PEERS_DRAIN_JOBS", "100000"))
DRAIN_SECONDS = float(os.environ.get("RAQUEL_PEERS_DRAIN_SECONDS", "30"))
LATENCY_SECONDS = float(os.environ.get("RAQUEL_PEERS_LATENCY_SECONDS", "10"))
LATENCY_RATE = 200
SINGLE_JOBS = 5000
BATCH_JOBS, BATCH = 50000, 100
WORKERS = (1, 4)

PYTHON = str(ROOT / "target/peers/python/bin/python")
PEER_PY = str(ROOT / "bench/peers/python/peer.py")
PEER_MJS = str(ROOT / "bench/peers/node/peer.mjs")
# system → (the name shown, the driver's command line up to the command)
SYSTEMS = {
    "raquel": ("raquel, Rust worker example", [str(ROOT / "tests/client/target/release/peer-raquel"), "raquel"]),
    "raquel-example": ("raquel, Python worker example", [PYTHON, PEER_PY, "raquel-example"]),
    "graphile-worker": ("graphile-worker", ["node", PEER_MJS, "graphile-worker"]),
    "pg-boss": ("pg-boss", ["node", PEER_MJS, "pg-boss"]),
    "pgqueuer": ("pgqueuer", [PYTHON, PEER_PY, "pgqueuer"]),
    "procrastinate": ("procrastinate", [PYTHON, PEER_PY, "procrastinate"]),
    "raquel-py": ("raquel, the Python library", [PYTHON, PEER_PY, "raquel-py"]),
    "raquel-pg-py": ("raquel-pg, raquel's Python library", [PYTHON, PEER_PY, "raquel-pg-py"]),
    "raquel-pg-ts": ("raquel-pg, raquel's TypeScript library", ["node", PEER_MJS, "raquel-pg-ts"]),
    "raquel-pg-rs": ("raquel-pg, raquel's Rust library",
                     [str(ROOT / "target/libraries/rust/release/examples/peer"), "raquel-pg-rs"]),
    "pgmq": ("pgmq", [str(ROOT / "target/peers/pgmq/release/peer-pgmq"), "pgmq"]),
}
OURS = ("raquel", "raquel-example", "raquel-pg-py", "raquel-pg-ts", "raquel-pg-rs")


def log(message):
    print(message, file=sys.stderr, flush=True)


def psql(database, *statements):
    command = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", HOST, "-p", PORT, "-U", "postgres", "-d", database]
    for statement in statements:
        command += ["-c", statement]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def url(database):
    return f"postgresql://postgres@{HOST}:{PORT}/{database}"


def driver(system, command, *options, timeout=600, check=True):
    """Runs a driver command to its end; returns (exit code, last JSON line)."""
    database = "peer_" + system.replace("-", "_")
    argv = SYSTEMS[system][1] + [command] + [str(option) for option in options]
    done = subprocess.run(argv, env={**os.environ, "PEER_URL": url(database)}, capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, (json.loads(lines[-1]) if lines else None)


def fresh(system):
    """A new database for the system, its schema installed."""
    database = "peer_" + system.replace("-", "_")
    psql("postgres", f"DROP DATABASE IF EXISTS {database} WITH (FORCE)", f"CREATE DATABASE {database}")
    driver(system, "setup")
    return database


def enqueue(system, batch):
    fresh(system)
    jobs = SINGLE_JOBS if batch == 1 else BATCH_JOBS
    code, result = driver(system, "enqueue", "--jobs", jobs, "--batch", batch, check=False)
    if code == 3:
        return None  # no batch call
    if code != 0 or result is None:
        raise RuntimeError(f"{system} enqueue --batch {batch} exited {code}")
    return result["jobs"] / result["seconds"]


def drain(system, workers):
    database = fresh(system)
    driver(system, "fill", "--jobs", DRAIN_JOBS, timeout=1200)
    psql(database, "VACUUM ANALYZE", "CHECKPOINT")
    _, result = driver(system, "work", "--workers", workers, "--expect", DRAIN_JOBS, "--max-seconds", DRAIN_SECONDS,
                       timeout=DRAIN_SECONDS + 300)
    return result["jobs"] / result["seconds"], result["jobs"]


def read_trace(path):
    seen, twice = {}, 0
    for line in pathlib.Path(path).read_text().splitlines():
        seq, at = line.split()
        twice += seq in seen
        seen[seq] = int(at)
    return seen, twice


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def latency(system, workers):
    """p50 and p99 in ms from the enqueue's commit to the handler's start,
    with the jobs not started by 10 s after the last enqueue and the jobs
    started twice."""
    database = fresh(system)
    with tempfile.TemporaryDirectory() as scratch:
        started_at, committed_at = f"{scratch}/started", f"{scratch}/committed"
        argv = SYSTEMS[system][1] + ["work", "--workers", str(workers), "--trace", started_at]
        worker = subprocess.Popen(argv, env={**os.environ, "PEER_URL": url(database)}, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while worker.stdout.readline().strip() != "ready":
                if time.monotonic() > deadline or worker.poll() is not None:
                    raise RuntimeError(f"{system} work never printed ready")
            driver(system, "produce", "--rate", LATENCY_RATE, "--seconds", LATENCY_SECONDS, "--trace", committed_at)
            committed, _ = read_trace(committed_at)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                started, twice = read_trace(started_at)
                if all(seq in started for seq in committed):
                    break
                time.sleep(0.2)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        started, twice = read_trace(started_at)
    waits = [(started[seq] - at) / 1000 for seq, at in committed.items() if seq in started]
    late = sum(seq not in started for seq in committed)
    return percentile(waits, 0.5), percentile(waits, 0.99), late, twice


def figure(values, digits=0):
    """The median, and the range when there are several rounds."""
    values = [value for value in values if value is not None]
    if not values:
        return "—"
    middle = f"{statistics.median(values):,.{digits}f}"
    if min(values) == max(values):
        return middle
    return f"{middle} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def main():
    chosen = os.environ.get("RAQUEL_PEERS_SYSTEMS")
    systems = [system for system in SYSTEMS if not chosen or system in chosen.split(",")]
    described = {}
    for system in systems:
        fresh(system)
        described[system] = driver(system, "describe")[1]
    results = {system: {} for system in systems}

    def record(system, key, value):
        results[system].setdefault(key, []).append(value)

    for round_number in range(ROUNDS):
        # Each round in another order, so that no system always goes first.
        order = systems[round_number % len(systems):] + systems[:round_number % len(systems)]
        for system in order:
            log(f"round {round_number + 1}/{ROUNDS}: {system}")
            record(system, "enqueue_1", enqueue(system, 1))
            record(system, f"enqueue_{BATCH}", enqueue(system, BATCH))
            for workers in WORKERS:
                rate, jobs = drain(system, workers)
                record(system, f"drain_{workers}", rate)
                record(system, f"drained_{workers}", jobs)
                p50, p99, late, twice = latency(system, workers)
                record(system, f"p50_{workers}", p50)
                record(system, f"p99_{workers}", p99)
                record(system, f"late_{workers}", late)
                record(system, f"twice_{workers}", twice)
            log(f"  {json.dumps({key: values[-1] for key, values in results[system].items()})}")
    report = render(systems, described, results)
    (ROOT / "bench/results/peers.md").write_text(report)
    print(report)


def render(systems, described, results):
    server = subprocess.run(["psql", "-X", "-At", "-h", HOST, "-p", PORT, "-U", "postgres", "-d", "postgres", "-c",
                             "SELECT version()"], capture_output=True, text=True).stdout.strip()
    name = {system: SYSTEMS[system][0] for system in systems}
    lines = [
        f"`bench/run --peers` on {datetime.date.today()}, {os.cpu_count()} cores, {platform.machine()}; "
        f"one server for all: {server.split(' on ')[0]}, fsync and synchronous_commit on, each measurement in a "
        f"fresh database. Medians of {ROUNDS} rounds, the range in brackets.",
        "",
        "| system | version | how its workers wait, and its settings |",
        "|---|---|---|",
    ]
    for system in systems:
        lines.append(f"| {name[system]} | {described[system]['version']} | {described[system]['settings']} |")
    lines += ["", f"**Enqueue**, jobs/s from one connection: {SINGLE_JOBS} one call at a time, and {BATCH_JOBS} "
              f"in batch calls of {BATCH} (— where the system has no batch call).", "",
              "| system | one at a time | batches of 100 |", "|---|---|---|"]
    for system in systems:
        lines.append(f"| {name[system]} | {figure(results[system]['enqueue_1'])} | "
                     f"{figure(results[system][f'enqueue_{BATCH}'])} |")
    lines += ["", f"**Drain**, jobs/s working a backlog of {DRAIN_JOBS:,} no-op jobs with 1 and 4 workers, from the "
              f"first job's start to the last job's end; a drain stops after {DRAIN_SECONDS:.0f} s and counts the "
              "jobs done by then (the jobs column).", "",
              "| system | 1 worker | jobs | 4 workers | jobs |", "|---|---|---|---|---|"]
    for system in systems:
        r = results[system]
        lines.append(f"| {name[system]} | {figure(r['drain_1'])} | {figure(r['drained_1'])} | {figure(r['drain_4'])} | "
                     f"{figure(r['drained_4'])} |")
    lines += ["", f"**Pickup latency**, ms from the enqueue's commit to the job's start, at {LATENCY_RATE} jobs/s "
              f"offered for {LATENCY_SECONDS:.0f} s, one job an enqueue call; jobs not started by 10 s after the last "
              "enqueue (late, not lost: the percentiles leave them out) and jobs started twice, summed over the "
              "rounds.", "",
              "| system | 1 worker p50 | p99 | 4 workers p50 | p99 | not started | twice |", "|---|---|---|---|---|---|---|"]
    for system in systems:
        r = results[system]
        lines.append(f"| {name[system]} | {figure(r['p50_1'], 2)} | {figure(r['p99_1'], 2)} | {figure(r['p50_4'], 2)} | "
                     f"{figure(r['p99_4'], 2)} | {sum(r['late_1']) + sum(r['late_4'])} | "
                     f"{sum(r['twice_1']) + sum(r['twice_4'])} |")
    lines += ["", *summary(systems, results), "", *library_goals(systems, results), ""]
    return "\n".join(lines)


PYTHON_PEERS = ("pgqueuer", "procrastinate", "raquel-py")


def library_goals(systems, results):
    """Issue 39's goals for the worker libraries (libraries/), on the 4-worker
    drain: each library against the peers its goal names."""
    def median(system):
        values = [value for value in results.get(system, {}).get("drain_4", []) if value is not None]
        return statistics.median(values) if values else None

    def fastest(candidates):
        measured = [s for s in candidates if s in systems and median(s) is not None]
        return max(measured, key=median, default=None)

    peers = [s for s in systems if s not in OURS]
    rows = [
        ("raquel-pg-py", "the fastest Python peer", fastest(PYTHON_PEERS), 2.0),
        ("raquel-pg-ts", "graphile-worker", fastest(("graphile-worker",)), 2.0),
        ("raquel-pg-rs", "the fastest peer", fastest(peers), 2.0),
        ("raquel-pg-rs", "the Rust example", fastest(("raquel",)), 1.0),
    ]
    lines = ["**The worker libraries' goals** (issue 39), drain with 4 workers (jobs/s, medians):", "",
             "| library | against | library | other | ratio | goal |", "|---|---|---|---|---|---|"]
    for ours, against, other, goal in rows:
        if median(ours) is None or other is None:
            continue
        ratio = median(ours) / median(other)
        lines.append(f"| {SYSTEMS[ours][0]} | {against} ({SYSTEMS[other][0]}) | {median(ours):,.0f} | "
                     f"{median(other):,.0f} | {ratio:.2f}× | ≥ {goal:g}×: {'met' if ratio >= goal else 'missed'} |")
    return lines if len(lines) > 4 else []


def summary(systems, results):
    """raquel's best against the best peer, figure by figure."""
    peers = [system for system in systems if system not in OURS]
    ours = [system for system in systems if system in OURS]
    if not peers or not ours:
        return []
    lines = ["| figure | raquel | fastest peer | raquel's lead (above 1: raquel ahead) |", "|---|---|---|---|"]
    for key, label, higher_is_better in [
        ("enqueue_1", "enqueue, one at a time (jobs/s)", True),
        (f"enqueue_{BATCH}", "enqueue, batches of 100 (jobs/s)", True),
        ("drain_1", "drain, 1 worker (jobs/s)", True),
        ("drain_4", "drain, 4 workers (jobs/s)", True),
        ("p99_1", "pickup p99, 1 worker (ms)", False),
        ("p99_4", "pickup p99, 4 workers (ms)", False),
    ]:
        def median(system):
            values = [value for value in results[system][key] if value is not None]
            return statistics.median(values) if values else None

        pick = max if higher_is_better else min
        best_ours = pick((s for s in ours if median(s) is not None), key=median, default=None)
        best_peer = pick((s for s in peers if median(s) is not None), key=median, default=None)
        if best_ours is None or best_peer is None:
            continue  # no figure on one side (a system without a batch call)
        ratio = median(best_ours) / median(best_peer) if higher_is_better else median(best_peer) / median(best_ours)
        lines.append(f"| {label} | {median(best_ours):,.{0 if higher_is_better else 2}f} ({SYSTEMS[best_ours][0]}) | "
                     f"{median(best_peer):,.{0 if higher_is_better else 2}f} ({SYSTEMS[best_peer][0]}) | {ratio:.2f}× |")
    return lines


if __name__ == "__main__":
    main()
