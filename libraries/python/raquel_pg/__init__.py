"""raquel_pg: enqueue helpers and a worker runtime for raquel, the PostgreSQL
job-queue extension, over its SQL verbs (psycopg 3). Sync API here;
asyncio in raquel_pg.aio."""

from ._common import JobEnd, Parked, WaitTimedOut
from .client import emit, enqueue, enqueue_batch, wait_result
from .worker import Job, Worker

__all__ = ["Job", "JobEnd", "Parked", "WaitTimedOut", "Worker", "emit", "enqueue", "enqueue_batch", "wait_result"]
__version__ = "0.1.0"
