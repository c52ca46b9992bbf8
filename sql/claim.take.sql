-- What rq_take does with the ready jobs it locked (a part of
-- sql/claim.ready.sql and sql/claim.ready_several.sql): nothing. The row
-- lock is the lease, and the job is written once, when this transaction
-- finishes it (src/take.rs); src/claim.rs hands each back as a claim would
-- make it (claimed, attempts + 1, by the worker, now).
claimed AS (SELECT * FROM ready)
