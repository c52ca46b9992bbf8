//! Behaviour inside one backend: each `#[pg_test]` runs in its own
//! transaction, which pgrx rolls back, so tests see only their own jobs.
//! Concurrency (several real connections) lives in `tests/client`.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    // Runs a statement in a subtransaction and returns its SQLSTATE
    // ('00000' when it succeeds), so one test can check many errors.
    extension_sql!(
        r#"
        CREATE FUNCTION tests.sqlstate_of(statement text) RETURNS text
        LANGUAGE plpgsql AS $$
        BEGIN
            EXECUTE statement;
            RETURN '00000';
        EXCEPTION WHEN OTHERS THEN
            RETURN SQLSTATE;
        END
        $$;
        "#,
        name = "test_sqlstate_of",
        requires = ["finish", "claim", "enqueue", "duties", "transitions", "observe", "events", "privileges"]
    );

    fn one<T: FromDatum + IntoDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap_or_else(|| panic!("{sql}: returned NULL"))
    }

    fn run(sql: &str) {
        Spi::run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    fn sqlstate(statement: &str) -> String {
        one(&format!("SELECT tests.sqlstate_of($stmt${statement}$stmt$)"))
    }

    fn enqueue(args: &str) -> String {
        one(&format!("SELECT id::text FROM rq_enqueue({args})"))
    }

    fn field<T: FromDatum + IntoDatum>(id: &str, column: &str) -> T {
        one(&format!("SELECT {column} FROM jobs WHERE id = '{id}'"))
    }

    /// Makes a failed job's retry due now, instead of sleeping through its backoff.
    fn make_due(id: &str) {
        run(&format!("UPDATE jobs SET scheduled_at = rq_now_ms() - 1 WHERE id = '{id}'"));
    }

    fn claim_one(queue: &str) -> Option<String> {
        // the scalar subquery turns "no row" into NULL
        Spi::get_one::<String>(&format!(
            "SELECT (SELECT id::text FROM rq_claim(ARRAY['{queue}'], worker => 'w1'))"
        ))
        .unwrap()
    }

    #[pg_test]
    fn enqueue_fills_the_libraries_defaults() {
        let id = enqueue("'emails', 'hello'");
        assert_eq!(field::<String>(&id, "queue"), "emails");
        assert_eq!(field::<String>(&id, "payload"), "hello");
        assert_eq!(field::<String>(&id, "status"), "queued");
        assert_eq!(field::<i32>(&id, "attempts"), 0);
        assert_eq!(field::<i32>(&id, "min_retry_delay"), 1000);
        assert_eq!(field::<i32>(&id, "max_retry_delay"), 43_200_000);
        assert_eq!(field::<i32>(&id, "backoff_base"), 1000);
        assert_eq!(field::<i32>(&id, "priority"), 0);
        assert!(field::<bool>(&id, "scheduled_at = enqueued_at"));
        assert!(field::<bool>(&id, "abs(enqueued_at - rq_now_ms()) < 5000"));
        assert!(field::<bool>(&id, "max_age IS NULL AND max_retry_count IS NULL"));
        // time-ordered UUIDv7
        assert_eq!(&id[14..15], "7");
    }

    #[pg_test]
    fn enqueue_without_arguments_uses_the_default_queue() {
        let id = enqueue("");
        assert_eq!(field::<String>(&id, "queue"), "default");
        assert!(field::<bool>(&id, "payload IS NULL"));
    }

    #[pg_test]
    fn jsonb_payload_is_stored_as_its_text() {
        let id = enqueue(r#"'q', '{"to": "a@b.c"}'::jsonb"#);
        assert_eq!(field::<String>(&id, "payload"), r#"{"to": "a@b.c"}"#);
    }

    #[pg_test]
    fn options_are_stored_in_milliseconds() {
        let id = enqueue(
            "'q', 'x', max_age => '90 seconds', max_retry_count => 3, \
             min_retry_delay => '2 s', max_retry_delay => '1 hour', backoff_base => '500 ms', priority => 7",
        );
        assert_eq!(field::<i64>(&id, "max_age"), 90_000);
        assert_eq!(field::<i32>(&id, "max_retry_count"), 3);
        assert_eq!(field::<i32>(&id, "min_retry_delay"), 2000);
        assert_eq!(field::<i32>(&id, "max_retry_delay"), 3_600_000);
        assert_eq!(field::<i32>(&id, "backoff_base"), 500);
        assert_eq!(field::<i32>(&id, "priority"), 7);
    }

    #[pg_test]
    fn at_and_delay_add_up() {
        let id = enqueue("'q', 'x', at => '2030-01-01 00:00:00+00', delay => '1 hour'");
        // 2030-01-01T01:00:00Z
        assert_eq!(field::<i64>(&id, "scheduled_at"), 1_893_459_600_000);
        let later = enqueue("'q', 'x', delay => '10 minutes'");
        assert_eq!(field::<i64>(&later, "scheduled_at - enqueued_at"), 600_000);
    }

    #[pg_test]
    fn a_plain_insert_is_a_claimable_job() {
        run("INSERT INTO jobs (queue, payload) VALUES ('plain', 'x')");
        let id = claim_one("plain").expect("the inserted job is claimable");
        assert_eq!(field::<String>(&id, "status"), "claimed");
    }

    #[pg_test]
    fn a_claim_is_an_attempt_and_a_lease() {
        let id = enqueue("'q', 'x'");
        let claimed: String = one("SELECT id::text FROM rq_claim(ARRAY['q'], worker => 'w1', lease => '30 seconds')");
        assert_eq!(claimed, id);
        assert_eq!(field::<String>(&id, "status"), "claimed");
        assert_eq!(field::<i32>(&id, "attempts"), 1);
        assert_eq!(field::<String>(&id, "claimed_by"), "w1");
        assert_eq!(field::<i64>(&id, "lease_expires_at - claimed_at"), 30_000);
        // nobody else gets it while the lease lives
        assert_eq!(claim_one("q"), None);
    }

    #[pg_test]
    fn default_lease_is_one_minute() {
        let id = enqueue("'q', 'x'");
        run("SELECT rq_claim(ARRAY['q'])");
        assert_eq!(field::<i64>(&id, "lease_expires_at - claimed_at"), 60_000);
    }

    #[pg_test]
    fn claims_go_by_priority_then_schedule() {
        let late = enqueue("'q', 'late', at => clock_timestamp() - interval '1 minute'");
        let early = enqueue("'q', 'early', at => clock_timestamp() - interval '2 minutes'");
        let urgent = enqueue("'q', 'urgent', priority => 5");
        assert_eq!(claim_one("q").as_deref(), Some(urgent.as_str()));
        assert_eq!(claim_one("q").as_deref(), Some(early.as_str()));
        assert_eq!(claim_one("q").as_deref(), Some(late.as_str()));
    }

    #[pg_test]
    fn claims_filter_by_queue() {
        enqueue("'a', '1'");
        enqueue("'b', '2'");
        enqueue("'c', '3'");
        assert_eq!(one::<i64>("SELECT count(*) FROM rq_claim(ARRAY['zzz'], batch => 10)"), 0);
        assert_eq!(one::<String>("SELECT string_agg(queue, ',') FROM rq_claim(ARRAY['b'], batch => 10)"), "b");
        assert_eq!(
            one::<String>("SELECT string_agg(queue, ',' ORDER BY queue) FROM rq_claim(ARRAY['a', 'c'], batch => 10)"),
            "a,c"
        );
        enqueue("'d', '4'");
        assert_eq!(one::<String>("SELECT string_agg(queue, ',') FROM rq_claim(batch => 10)"), "d");
    }

    #[pg_test]
    fn a_batch_claims_up_to_its_size_in_order() {
        for i in 1..=5 {
            enqueue(&format!("'q', '{i}', at => clock_timestamp() - interval '{}' second", 10 - i));
        }
        assert_eq!(one::<String>("SELECT string_agg(payload, ',') FROM rq_claim(ARRAY['q'], batch => 3)"), "1,2,3");
        assert_eq!(one::<String>("SELECT string_agg(payload, ',') FROM rq_claim(ARRAY['q'], batch => 3)"), "4,5");
    }

    #[pg_test]
    fn future_jobs_wait_for_their_time() {
        enqueue("'q', 'x', delay => '1 hour'");
        assert_eq!(claim_one("q"), None);
    }

    #[pg_test]
    fn expired_jobs_are_never_handed_out() {
        // scheduled 2 minutes ago with a 1 minute max_age: expired, though
        // nothing has marked it so yet
        let id = enqueue("'q', 'x', at => clock_timestamp() - interval '2 minutes', max_age => '1 minute'");
        assert_eq!(claim_one("q"), None);
        assert_eq!(field::<String>(&id, "status"), "queued");
        let fresh = enqueue("'q', 'y', at => clock_timestamp() - interval '30 seconds', max_age => '1 minute'");
        assert_eq!(claim_one("q"), Some(fresh));
    }

    #[pg_test]
    fn complete_finishes_the_job() {
        let id = enqueue("'q', 'x'");
        claim_one("q");
        assert_eq!(one::<String>(&format!("SELECT status FROM rq_complete('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "success");
        assert!(field::<bool>(&id, "finished_at >= claimed_at AND lease_expires_at IS NULL"));
        assert_eq!(claim_one("q"), None);
    }

    #[pg_test]
    fn fail_retries_after_backoff() {
        let id = enqueue("'q', 'x'");
        claim_one("q");
        let before: i64 = one("SELECT rq_now_ms()");
        run(&format!("SELECT rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'), 'smtp timeout', 'trace…')"));
        let after: i64 = one("SELECT rq_now_ms()");
        assert_eq!(field::<String>(&id, "status"), "failed");
        assert_eq!(field::<String>(&id, "error"), "smtp timeout");
        assert_eq!(field::<String>(&id, "error_trace"), "trace…");
        let due = field::<i64>(&id, "scheduled_at");
        assert!(before + 1000 <= due && due <= after + 1000, "first retry 1 s after the failure");
        // not ready until its backoff has passed…
        assert_eq!(claim_one("q"), None);
        make_due(&id);
        // …then claimed again as attempt 2, and failing again waits 2 s
        assert_eq!(claim_one("q").as_deref(), Some(id.as_str()));
        assert_eq!(field::<i32>(&id, "attempts"), 2);
        run(&format!("SELECT rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))"));
        assert!(field::<bool>(&id, "scheduled_at - rq_now_ms() BETWEEN 1900 AND 2000"));
    }

    #[pg_test]
    fn n_retries_mean_n_plus_one_attempts() {
        let id = enqueue("'q', 'x', max_retry_count => 2");
        for attempt in 1..=3 {
            make_due(&id);
            assert_eq!(claim_one("q").as_deref(), Some(id.as_str()), "attempt {attempt}");
            run(&format!("SELECT rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'), 'boom {attempt}')"));
        }
        assert_eq!(field::<String>(&id, "status"), "exhausted");
        assert_eq!(field::<i32>(&id, "attempts"), 3);
        assert_eq!(field::<String>(&id, "error"), "boom 3");
        assert!(field::<bool>(&id, "finished_at IS NOT NULL"));
        make_due(&id);
        assert_eq!(claim_one("q"), None);
    }

    #[pg_test]
    fn zero_retries_exhaust_on_the_first_failure() {
        let id = enqueue("'q', 'x', max_retry_count => 0");
        claim_one("q");
        assert_eq!(one::<String>(&format!("SELECT status FROM rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "exhausted");
    }

    #[pg_test]
    fn null_retry_count_retries_forever() {
        let id = enqueue("'q', 'x', min_retry_delay => '0', backoff_base => '0'");
        for _ in 0..20 {
            make_due(&id);
            claim_one("q").expect("still retried");
            run(&format!("SELECT rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))"));
        }
        assert_eq!(field::<String>(&id, "status"), "failed");
        assert_eq!(field::<i32>(&id, "attempts"), 20);
    }

    #[pg_test]
    fn the_attempt_number_fences_a_stale_worker() {
        let id = enqueue("'q', 'x'");
        claim_one("q");
        // the first lease ran out and the job was handed out again
        run(&format!("SELECT rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'), 'lease expired')"));
        make_due(&id);
        claim_one("q");
        assert_eq!(sqlstate(&format!("SELECT rq_complete('{id}', attempt => 1)")), "55000");
        assert_eq!(sqlstate(&format!("SELECT rq_fail('{id}', 1, 'late')")), "55000");
        assert_eq!(field::<String>(&id, "status"), "claimed");
        assert!(field::<bool>(&id, "error = 'lease expired'"));
        assert_eq!(one::<String>(&format!("SELECT status FROM rq_complete('{id}', attempt => 2)")), "success");
    }

    #[pg_test]
    fn finishing_an_unknown_or_unclaimed_job_is_an_error() {
        let unknown = "00000000-0000-7000-8000-000000000000";
        assert_eq!(sqlstate(&format!("SELECT rq_complete('{unknown}', 1)")), "P0002");
        assert_eq!(sqlstate(&format!("SELECT rq_fail('{unknown}', 1)")), "P0002");
        assert_eq!(sqlstate("SELECT rq_complete(NULL, 1)"), "22023");
        let id = enqueue("'q', 'x'");
        assert_eq!(sqlstate(&format!("SELECT rq_complete('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "55000");
        assert_eq!(sqlstate(&format!("SELECT rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "55000");
        claim_one("q");
        run(&format!("SELECT rq_complete('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))"));
        assert_eq!(sqlstate(&format!("SELECT rq_complete('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "55000");
        assert_eq!(sqlstate(&format!("SELECT rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "55000");
    }

    #[pg_test]
    fn bad_enqueue_arguments_are_refused() {
        for bad in [
            "NULL, 'x'",
            "'', 'x'",
            "'q', 'x', delay => '-1 second'",
            "'q', 'x', delay => '200 years'",
            "'q', 'x', at => 'infinity'",
            "'q', 'x', max_age => '0'",
            "'q', 'x', max_age => '-5 minutes'",
            "'q', 'x', max_retry_count => -1",
            "'q', 'x', min_retry_delay => '-1 ms'",
            "'q', 'x', max_retry_delay => '30 days'",
            "'q', 'x', backoff_base => '-1 s'",
            "'q', 'x', min_retry_delay => '1 hour', max_retry_delay => '1 minute'",
        ] {
            assert_eq!(sqlstate(&format!("SELECT rq_enqueue({bad})")), "22023", "rq_enqueue({bad})");
        }
        assert_eq!(one::<i64>("SELECT count(*) FROM jobs"), 0);
    }

    #[pg_test]
    fn bad_claim_arguments_are_refused() {
        enqueue("'q', 'x'");
        for bad in [
            "batch => 0",
            "batch => -3",
            "batch => NULL",
            "batch => 1000000",
            "lease => '0'",
            "lease => '-1 minute'",
            "lease => NULL",
            "lease => '2 years'",
            "queues => ARRAY[NULL]::text[]",
            "queues => ARRAY['q', NULL]",
            "queues => ARRAY['']",
        ] {
            assert_eq!(sqlstate(&format!("SELECT rq_claim({bad})")), "22023", "rq_claim({bad})");
        }
        assert_eq!(one::<i64>("SELECT count(*) FROM jobs WHERE status = 'queued' AND attempts = 0"), 1);
    }

    #[pg_test]
    fn table_constraints_reject_impossible_rows() {
        for bad in [
            "INSERT INTO jobs (queue, status) VALUES ('q', 'done')",
            "INSERT INTO jobs (queue, min_retry_delay) VALUES ('q', -1)",
            "INSERT INTO jobs (queue, max_retry_count) VALUES ('q', -1)",
            "INSERT INTO jobs (queue, min_retry_delay, max_retry_delay) VALUES ('q', 10, 5)",
            "INSERT INTO jobs (queue, max_age) VALUES ('q', 0)",
        ] {
            assert_eq!(sqlstate(bad), "23514", "{bad}");
        }
        assert_eq!(sqlstate("INSERT INTO jobs (queue) VALUES (NULL)"), "23502");
    }

    #[pg_test]
    fn backoff_is_callable_from_sql() {
        assert_eq!(one::<i64>("SELECT rq_backoff(1, 1000, 1000, 43200000)"), 1000);
        assert_eq!(one::<i64>("SELECT rq_backoff(3, 1000, 1000, 43200000)"), 4000);
        assert_eq!(one::<i64>("SELECT rq_backoff(10000, 1000, 1000, 43200000)"), 43_200_000);
    }

    #[pg_test]
    fn expire_finishes_jobs_past_their_max_age() {
        let stale = enqueue("'q', 'x', at => clock_timestamp() - interval '2 minutes', max_age => '1 minute'");
        let failed_stale = enqueue("'q', 'y', at => clock_timestamp() - interval '2 minutes', max_age => '1 minute'");
        run(&format!("UPDATE jobs SET status = 'failed', attempts = 1 WHERE id = '{failed_stale}'"));
        let fresh = enqueue("'q', 'z', max_age => '1 hour'");
        let ageless = enqueue("'q', 'w', at => clock_timestamp() - interval '2 days'");
        assert_eq!(one::<i64>("SELECT rq_expire()"), 2);
        assert_eq!(field::<String>(&stale, "status"), "expired");
        assert_eq!(field::<String>(&failed_stale, "status"), "expired");
        assert!(field::<bool>(&stale, "finished_at IS NOT NULL"));
        assert_eq!(field::<String>(&fresh, "status"), "queued");
        assert_eq!(field::<String>(&ageless, "status"), "queued");
        assert_eq!(one::<i64>("SELECT rq_expire()"), 0);
    }

    #[pg_test]
    fn expire_works_in_batches() {
        for _ in 0..5 {
            enqueue("'q', 'x', at => clock_timestamp() - interval '2 minutes', max_age => '1 minute'");
        }
        assert_eq!(one::<i64>("SELECT rq_expire(batch => 2)"), 2);
        assert_eq!(one::<i64>("SELECT rq_expire(batch => 2)"), 2);
        assert_eq!(one::<i64>("SELECT rq_expire(batch => 2)"), 1);
    }

    #[pg_test]
    fn rescue_counts_an_expired_lease_as_a_failed_attempt() {
        let id = enqueue("'q', 'x'");
        run("SELECT rq_claim(ARRAY['q'], worker => 'w9', lease => '1 minute')");
        // the lease has not run out: nothing to rescue
        assert_eq!(one::<i64>("SELECT rq_rescue()"), 0);
        run(&format!("UPDATE jobs SET lease_expires_at = rq_now_ms() - 1 WHERE id = '{id}'"));
        assert_eq!(one::<i64>("SELECT rq_rescue()"), 1);
        assert_eq!(field::<String>(&id, "status"), "failed");
        assert_eq!(field::<i32>(&id, "attempts"), 1);
        assert_eq!(field::<String>(&id, "error"), "lease expired: worker w9 did not finish attempt 1 in time");
        assert!(field::<bool>(&id, "scheduled_at - rq_now_ms() BETWEEN 900 AND 1000"));
    }

    #[pg_test]
    fn rescue_exhausts_a_job_with_no_retry_left() {
        let id = enqueue("'q', 'x', max_retry_count => 0");
        run("SELECT rq_claim(ARRAY['q'])");
        run(&format!("UPDATE jobs SET lease_expires_at = rq_now_ms() - 1 WHERE id = '{id}'"));
        assert_eq!(one::<i64>("SELECT rq_rescue()"), 1);
        assert_eq!(field::<String>(&id, "status"), "exhausted");
        assert!(field::<bool>(&id, "error LIKE 'lease expired%' AND finished_at IS NOT NULL"));
    }

    #[pg_test]
    fn rescue_gives_library_claims_a_one_minute_lease() {
        // a claim made the Python library's way: no lease_expires_at
        let old = enqueue("'q', 'x'");
        let recent = enqueue("'q', 'y'");
        run(&format!(
            "UPDATE jobs SET status = 'claimed', attempts = 1, claimed_at = rq_now_ms() - 61000 WHERE id = '{old}'"
        ));
        run(&format!(
            "UPDATE jobs SET status = 'claimed', attempts = 1, claimed_at = rq_now_ms() - 30000 WHERE id = '{recent}'"
        ));
        assert_eq!(one::<i64>("SELECT rq_rescue()"), 1);
        assert_eq!(field::<String>(&old, "status"), "failed");
        assert_eq!(field::<String>(&recent, "status"), "claimed");
    }

    #[pg_test]
    fn prune_deletes_only_finished_jobs_older_than_the_retention() {
        let old_done = enqueue("'q', 'old'");
        let new_done = enqueue("'q', 'new'");
        let old_waiting = enqueue("'w', 'waiting', at => clock_timestamp() - interval '30 days'");
        run("SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['q'], batch => 2)");
        run(&format!("UPDATE jobs SET finished_at = rq_now_ms() - 8 * 86400000::bigint WHERE id = '{old_done}'"));
        let failed = enqueue("'f', 'retrying'");
        run("SELECT rq_claim(ARRAY['f'])");
        run(&format!("SELECT rq_fail('{failed}', (SELECT attempts FROM jobs WHERE id = '{failed}'))"));
        run(&format!("UPDATE jobs SET enqueued_at = 0 WHERE id = '{failed}'"));

        // the default keeps a week
        assert_eq!(one::<i64>("SELECT rq_prune()"), 1);
        let left: String = one("SELECT string_agg(payload, ',' ORDER BY payload) FROM jobs");
        assert_eq!(left, "new,retrying,waiting");
        assert!(field::<bool>(&new_done, "status = 'success'"));
        assert!(field::<bool>(&old_waiting, "status = 'queued'"));
        // an hour keeps the job that just finished; a retention of 0 given
        // to rq_prune keeps no finished job, and never takes unfinished ones
        run(&format!("UPDATE jobs SET finished_at = rq_now_ms() - 10 WHERE id = '{new_done}'"));
        assert_eq!(one::<i64>("SELECT rq_prune(retention => '1 hour')"), 0);
        assert_eq!(one::<i64>("SELECT rq_prune(retention => '0')"), 1);
        assert_eq!(one::<i64>("SELECT count(*) FROM jobs"), 2);
    }

    #[pg_test]
    fn duties_refuse_bad_arguments() {
        for bad in [
            "rq_expire(0)",
            "rq_rescue(-1)",
            "rq_prune(NULL)",
            "rq_prune(10, '-1 day')",
            "rq_expire(1000000)",
        ] {
            assert_eq!(sqlstate(&format!("SELECT {bad}")), "22023", "{bad}");
        }
    }

    #[pg_test]
    fn settings_are_registered_with_their_defaults() {
        assert_eq!(one::<String>("SELECT current_setting('raquel.worker_interval')"), "1s");
        assert_eq!(one::<String>("SELECT current_setting('raquel.retention')"), "7d");
        assert_eq!(one::<String>("SELECT current_setting('raquel.batch_size')"), "1000");
        assert_eq!(one::<String>("SELECT current_setting('raquel.worker_enabled')"), "on");
        assert_eq!(one::<String>("SELECT current_setting('raquel.databases')"), "");
    }

    #[pg_test]
    fn the_launcher_shows_in_pg_stat_activity() {
        // the test server preloads the library (pg_test::postgresql_conf_options)
        assert_eq!(one::<i64>("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'raquel launcher'"), 1);
    }

    const UNKNOWN: &str = "00000000-0000-7000-8000-000000000000";

    /// Asserts the verb's errors: unknown id (P0002), NULL id (22023), and
    /// 55000 for each status in `wrong`, leaving each such job unchanged.
    /// `verb` refuses an unknown id, a NULL id and a job in each `wrong`
    /// status, changing nothing; a verb on a claimed job (`fenced`) is given
    /// an attempt, and refuses a NULL one (22004).
    fn assert_verb_errors(verb: &str, wrong: &[&str]) {
        let fenced = ["rq_reschedule", "rq_reject", "rq_extend"].contains(&verb);
        let attempt = if fenced { ", 1" } else { "" };
        assert_eq!(sqlstate(&format!("SELECT {verb}('{UNKNOWN}'{attempt})")), "P0002", "{verb} unknown id");
        assert_eq!(sqlstate(&format!("SELECT {verb}(NULL{attempt})")), "22023", "{verb} NULL id");
        for status in wrong {
            let id = enqueue("'wrong', 'x'");
            run(&format!("UPDATE jobs SET status = '{status}' WHERE id = '{id}'"));
            let before: String = field(&id, "jobs::text");
            assert_eq!(sqlstate(&format!("SELECT {verb}('{id}'{attempt})")), "55000", "{verb} on a {status} job");
            assert_eq!(field::<String>(&id, "jobs::text"), before, "{verb} changed a {status} job");
        }
        if fenced {
            let id = enqueue("'wrong', 'x'");
            run(&format!("UPDATE jobs SET status = 'claimed', attempts = 1, claimed_at = rq_now_ms() WHERE id = '{id}'"));
            let before: String = field(&id, "jobs::text");
            assert_eq!(sqlstate(&format!("SELECT {verb}('{id}', NULL)")), "22004", "{verb} without its attempt");
            assert_eq!(field::<String>(&id, "jobs::text"), before, "{verb} without its attempt changed the job");
        }
    }

    #[pg_test]
    fn reschedule_puts_a_claimed_job_back_later_without_using_a_retry() {
        let id = enqueue("'q', 'x', max_retry_count => 0");
        claim_one("q");
        let row: String = one(&format!(
            "SELECT status || ',' || attempts || ',' || requeues || ',' || claimed_by \
             FROM rq_reschedule('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'), delay => '10 minutes')"
        ));
        assert_eq!(row, "queued,1,1,w1");
        assert!(field::<bool>(&id, "scheduled_at - rq_now_ms() BETWEEN 599000 AND 600000"));
        assert!(field::<bool>(&id, "lease_expires_at IS NULL AND claimed_at IS NOT NULL"));
        // no retry was used: with max_retry_count 0, the next failure is the
        // first one and exhausts; before it, the job is claimable again
        make_due(&id);
        claim_one("q").expect("claimable again");
        assert_eq!(field::<i32>(&id, "attempts"), 2, "every claim is an attempt");
        assert_eq!(one::<String>(&format!("SELECT status FROM rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "exhausted");
    }

    #[pg_test]
    fn reschedule_takes_at_or_the_min_retry_delay() {
        let id = enqueue("'q', 'x', min_retry_delay => '30 seconds'");
        claim_one("q");
        run(&format!("SELECT rq_reschedule('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))"));
        assert!(field::<bool>(&id, "scheduled_at - rq_now_ms() BETWEEN 29000 AND 30000"));
        make_due(&id);
        claim_one("q");
        run(&format!("SELECT rq_reschedule('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'), at => '2030-01-01 00:00:00+00', delay => '1 minute')"));
        assert_eq!(field::<i64>(&id, "scheduled_at"), 1_893_456_060_000);
        assert_eq!(sqlstate(&format!("SELECT rq_reschedule('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "55000");
        make_due(&id);
        claim_one("q");
        assert_eq!(sqlstate(&format!("SELECT rq_reschedule('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'), delay => '-1 s')")), "22023");
        assert_eq!(sqlstate(&format!("SELECT rq_reschedule('{id}', attempt => 1)")), "55000");
        assert_eq!(field::<String>(&id, "status"), "claimed");
        assert_verb_errors("rq_reschedule", &["queued", "failed", "success", "cancelled", "expired", "exhausted"]);
    }

    #[pg_test]
    fn reject_hands_the_job_to_another_worker_at_once() {
        let id = enqueue("'q', 'x', max_retry_count => 0");
        claim_one("q");
        let row: String = one(&format!(
            "SELECT status || ',' || attempts || ',' || requeues || ',' || (claimed_by IS NULL) || ',' || (claimed_at IS NULL) \
             FROM rq_reject('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))"
        ));
        assert_eq!(row, "queued,1,1,true,true");
        assert_eq!(claim_one("q").as_deref(), Some(id.as_str()), "claimable at once");
        assert_eq!(one::<String>(&format!("SELECT status FROM rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "exhausted", "no retry used");
        assert_verb_errors("rq_reject", &["queued", "failed", "success", "cancelled", "expired", "exhausted"]);
    }

    #[pg_test]
    fn extend_pushes_the_lease_out() {
        let id = enqueue("'q', 'x'");
        run("SELECT rq_claim(ARRAY['q'], lease => '10 seconds')");
        run(&format!("SELECT rq_extend('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'), lease => '5 minutes')"));
        assert!(field::<bool>(&id, "lease_expires_at - rq_now_ms() BETWEEN 299000 AND 300000"));
        run(&format!("SELECT rq_extend('{id}', attempt => 1)"));
        assert!(field::<bool>(&id, "lease_expires_at - rq_now_ms() BETWEEN 59000 AND 60000"));
        // a rescue after the extension finds nothing to do
        assert_eq!(one::<i64>("SELECT rq_rescue()"), 0);
        assert_eq!(sqlstate(&format!("SELECT rq_extend('{id}', attempt => 2)")), "55000");
        assert_eq!(sqlstate(&format!("SELECT rq_extend('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'), lease => '0')")), "22023");
        assert_eq!(sqlstate(&format!("SELECT rq_extend('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'), lease => NULL)")), "22023");
        assert_verb_errors("rq_extend", &["queued", "failed", "success", "cancelled", "expired", "exhausted"]);
    }

    #[pg_test]
    fn cancel_ends_any_unfinished_job() {
        for status in ["queued", "claimed", "failed"] {
            let id = enqueue("'q', 'x'");
            run(&format!("UPDATE jobs SET status = '{status}', attempts = 1 WHERE id = '{id}'"));
            assert_eq!(one::<String>(&format!("SELECT status FROM rq_cancel('{id}')")), "cancelled");
            assert!(field::<bool>(&id, "finished_at IS NOT NULL"));
        }
        // a worker that was working on a cancelled job learns it on completing
        let id = enqueue("'c', 'x'");
        claim_one("c");
        run(&format!("SELECT rq_cancel('{id}')"));
        assert_eq!(sqlstate(&format!("SELECT rq_complete('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "55000");
        assert_eq!(claim_one("c"), None);
        assert_verb_errors("rq_cancel", &["success", "cancelled", "expired", "exhausted"]);
    }

    #[pg_test]
    fn retry_requeues_an_ended_job_with_a_fresh_retry_budget() {
        for status in ["failed", "exhausted", "expired", "cancelled"] {
            let id = enqueue("'q', 'x', max_retry_count => 1");
            run(&format!("UPDATE jobs SET status = '{status}', attempts = 2, finished_at = 1 WHERE id = '{id}'"));
            let row: String = one(&format!(
                "SELECT status || ',' || attempts || ',' || requeues || ',' || (finished_at IS NULL) FROM rq_retry('{id}')"
            ));
            assert_eq!(row, "queued,2,2,true", "retry of a {status} job");
            assert!(field::<bool>(&id, "abs(scheduled_at - rq_now_ms()) < 1000"));
            // a whole budget again: one retry, so the first failure retries…
            assert_eq!(claim_one("q").as_deref(), Some(id.as_str()));
            assert_eq!(one::<String>(&format!("SELECT status FROM rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "failed");
            assert!(field::<bool>(&id, "scheduled_at - rq_now_ms() BETWEEN 900 AND 1000"), "backoff starts over");
            // …and the second exhausts
            make_due(&id);
            claim_one("q");
            assert_eq!(one::<String>(&format!("SELECT status FROM rq_fail('{id}', (SELECT attempts FROM jobs WHERE id = '{id}'))")), "exhausted");
            assert_eq!(field::<i32>(&id, "attempts"), 4, "attempts never go back");
            run(&format!("DELETE FROM jobs WHERE id = '{id}'"));
        }
        assert_verb_errors("rq_retry", &["queued", "claimed", "success"]);
    }

    #[pg_test]
    fn a_batch_enqueue_is_one_call_for_many_jobs_in_order() {
        let n: i64 = one(
            "SELECT count(*) FROM rq_enqueue_batch('b', ARRAY(SELECT i::text FROM generate_series(1, 3000) i), \
             max_retry_count => 2, priority => 3)",
        );
        assert_eq!(n, 3000);
        assert_eq!(
            one::<String>("SELECT string_agg(DISTINCT max_retry_count || '/' || priority, ',') FROM jobs"),
            "2/3"
        );
        // time-ordered ids follow the array's order
        let in_order: bool = one(
            "SELECT bool_and(payload::int = n) FROM (SELECT payload, row_number() OVER (ORDER BY id) n FROM jobs) s",
        );
        assert!(in_order);
        let json: String = one(
            r#"SELECT string_agg(payload, '|') FROM rq_enqueue_batch('j', ARRAY['{"a": 1}', NULL, '[2]']::jsonb[])"#,
        );
        assert_eq!(json, r#"{"a": 1}|[2]"#);
        assert_eq!(one::<i64>("SELECT count(*) FROM jobs WHERE queue = 'j' AND payload IS NULL"), 1);
        assert_eq!(one::<i64>("SELECT count(*) FROM rq_enqueue_batch('e', '{}'::text[])"), 0);
        for bad in [
            "rq_enqueue_batch('q', NULL::text[])",
            "rq_enqueue_batch(NULL, ARRAY['x'])",
            "rq_enqueue_batch('q', ARRAY['x'], delay => '-1 s')",
        ] {
            assert_eq!(sqlstate(&format!("SELECT * FROM {bad}")), "22023", "{bad}");
        }
    }

    #[pg_test]
    fn a_batch_complete_is_all_or_nothing() {
        run("SELECT rq_enqueue_batch('q', ARRAY['1', '2', '3', '4'])");
        let ids: String = one("SELECT string_agg(quote_literal(id), ',') FROM rq_claim(ARRAY['q'], batch => 3)");
        let unclaimed: String = one("SELECT id::text FROM jobs WHERE status = 'queued'");
        // one unclaimed id spoils the batch: 55000, nothing completed
        assert_eq!(
            sqlstate(&format!("SELECT rq_complete_batch(ARRAY[{ids}, '{unclaimed}']::uuid[], ARRAY[1, 1, 1, 0])")),
            "55000"
        );
        assert_eq!(sqlstate(&format!("SELECT rq_complete_batch(ARRAY[{ids}, '{UNKNOWN}']::uuid[], ARRAY[1, 1, 1, 1])")), "P0002");
        assert_eq!(sqlstate(&format!("SELECT rq_complete_batch(ARRAY[{ids}]::uuid[], ARRAY[1, 2, 1])")), "55000");
        assert_eq!(sqlstate(&format!("SELECT rq_complete_batch(ARRAY[{ids}]::uuid[], ARRAY[1])")), "22023");
        assert_eq!(sqlstate("SELECT rq_complete_batch(NULL, NULL)"), "22023");
        assert_eq!(sqlstate("SELECT rq_complete_batch(ARRAY[NULL]::uuid[], ARRAY[1])"), "22023");
        assert_eq!(one::<i64>("SELECT count(*) FROM jobs WHERE status = 'claimed'"), 3);
        let done: String = one(&format!(
            "SELECT string_agg(status, ',') FROM rq_complete_batch(ARRAY[{ids}]::uuid[], ARRAY[1, 1, 1])"
        ));
        assert_eq!(done, "success,success,success");
        assert_eq!(one::<i64>("SELECT count(*) FROM rq_complete_batch('{}', '{}')"), 0);
        // a job completed before is refused like an unclaimed one; the same
        // claimed id twice completes it once
        let last: String = one("SELECT quote_literal(id) FROM rq_claim(ARRAY['q'])");
        let finished: String = one("SELECT quote_literal(min(id::text)) FROM jobs WHERE status = 'success'");
        assert_eq!(sqlstate(&format!("SELECT rq_complete_batch(ARRAY[{last}, {finished}]::uuid[], ARRAY[1, 1])")), "55000");
        assert_eq!(one::<String>(&format!("SELECT status FROM jobs WHERE id = {last}")), "claimed");
        assert_eq!(one::<i64>(&format!("SELECT count(*) FROM rq_complete_batch(ARRAY[{last}, {last}]::uuid[], ARRAY[1, 1])")), 1);
    }

    #[pg_test]
    fn stats_count_and_queues_describe_the_queue() {
        run("SELECT rq_enqueue_batch('a', ARRAY['1', '2', '3'], at => clock_timestamp() - interval '1 minute')");
        run("SELECT rq_enqueue('a', 'later', delay => '1 hour')");
        run("SELECT rq_enqueue('b', 'x')");
        run("SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['a'])");
        run("SELECT rq_fail(id, attempts) FROM rq_claim(ARRAY['b'])");
        let a: String = one(
            "SELECT concat_ws(',', total, queued, claimed, success, failed, expired, exhausted, cancelled, ready) \
             FROM rq_stats() WHERE queue = 'a'",
        );
        assert_eq!(a, "4,3,0,1,0,0,0,0,2");
        assert!(one::<bool>("SELECT oldest_ready_age BETWEEN '59 seconds' AND '61 seconds' FROM rq_stats() WHERE queue = 'a'"));
        assert!(one::<bool>("SELECT ready = 0 AND oldest_ready_age IS NULL FROM rq_stats() WHERE queue = 'b'"));
        assert_eq!(one::<String>("SELECT string_agg(q, ',') FROM rq_queues() q"), "a,b");
        assert_eq!(one::<i64>("SELECT rq_count()"), 5);
        assert_eq!(one::<i64>("SELECT rq_count('a')"), 4);
        assert_eq!(one::<i64>("SELECT rq_count(statuses => ARRAY['success', 'failed'])"), 2);
        assert_eq!(one::<i64>("SELECT rq_count('b', ARRAY['queued'])"), 0);
    }

    #[pg_test]
    fn the_view_shows_times_as_timestamps() {
        let id = enqueue("'q', 'x', at => '2030-01-01 00:00:00+00', max_age => '90 seconds'");
        assert!(one::<bool>(&format!(
            "SELECT scheduled_at = '2030-01-01 00:00:00+00' AND max_age = '90 seconds' \
                    AND backoff_base = '1 second' AND finished_at IS NULL FROM rq_jobs WHERE id = '{id}'"
        )));
    }

    #[pg_test]
    fn a_key_gives_back_the_unfinished_job_that_holds_it() {
        let first = enqueue("'q', 'one', key => 'order-7'");
        let again = enqueue("'q', 'two', key => 'order-7'");
        assert_eq!(again, first, "the unfinished job with the key");
        assert_eq!(field::<String>(&first, "payload"), "one");
        // another queue, or no key: a job of its own
        assert_ne!(enqueue("'other', 'x', key => 'order-7'"), first);
        assert_ne!(enqueue("'nokey', 'x'"), enqueue("'nokey', 'x'"));
        // claimed and failed jobs still hold their key…
        claim_one("q");
        assert_eq!(enqueue("'q', 'three', key => 'order-7'"), first);
        run(&format!("SELECT rq_fail('{first}', (SELECT attempts FROM jobs WHERE id = '{first}'))"));
        assert_eq!(enqueue("'q', 'three', key => 'order-7'"), first);
        // …a finished one does not
        make_due(&first);
        claim_one("q");
        run(&format!("SELECT rq_complete('{first}', (SELECT attempts FROM jobs WHERE id = '{first}'))"));
        let fresh = enqueue("'q', 'four', key => 'order-7'");
        assert_ne!(fresh, first);
        // retrying the old job while the new one holds the key is refused
        run(&format!("UPDATE jobs SET status = 'exhausted' WHERE id = '{first}'"));
        assert_eq!(sqlstate(&format!("SELECT rq_retry('{first}')")), "55000");
    }

    #[pg_test]
    fn a_batch_with_keys_enqueues_each_key_once() {
        let rows: String = one(
            "SELECT string_agg(payload, ',' ORDER BY payload) FROM rq_enqueue_batch('q', \
             ARRAY['a', 'b', 'c', 'd'], keys => ARRAY['k1', 'k2', 'k1', NULL])",
        );
        assert_eq!(rows, "a,b,d", "the second k1 got the first k1's job");
        let again: String = one(
            "SELECT string_agg(payload, ',' ORDER BY payload) FROM rq_enqueue_batch('q', \
             ARRAY['x', 'y'], keys => ARRAY['k2', 'k3'])",
        );
        assert_eq!(again, "b,y");
        assert_eq!(one::<i64>("SELECT count(*) FROM jobs"), 4);
        assert_eq!(sqlstate("SELECT rq_enqueue_batch('q', ARRAY['a', 'b'], keys => ARRAY['k'])"), "22023");
    }

    #[pg_test]
    fn queue_channels_fit_postgres_identifiers() {
        assert_eq!(one::<String>("SELECT rq_channel('emails')"), "rq_emails");
        let long: String = one("SELECT rq_channel(repeat('x', 61))");
        assert_eq!(long.len(), 35);
        assert!(long.starts_with("rq_"));
        assert!(one::<bool>("SELECT octet_length(rq_channel(repeat('é', 40))) <= 63"));
        // a plain INSERT into a long-named queue still works (its NOTIFY too)
        run("INSERT INTO jobs (queue) VALUES (repeat('q', 200))");
    }

    #[pg_test]
    fn the_row_trigger_enqueues_a_json_description_of_the_change() {
        run("CREATE TABLE tests.orders (id int PRIMARY KEY, total numeric)");
        run("CREATE TRIGGER orders_jobs AFTER INSERT OR UPDATE OR DELETE ON tests.orders \
             FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('orders')");
        run("INSERT INTO tests.orders VALUES (1, 9.5)");
        run("UPDATE tests.orders SET total = 10 WHERE id = 1");
        run("DELETE FROM tests.orders WHERE id = 1");
        let payloads: String = one(
            "SELECT string_agg(payload, E'\\n' ORDER BY id) FROM jobs WHERE queue = 'orders'",
        );
        assert_eq!(
            payloads,
            [
                r#"{"op": "INSERT", "new": {"id": 1, "total": 9.5}, "old": null, "table": "orders", "schema": "tests"}"#,
                r#"{"op": "UPDATE", "new": {"id": 1, "total": 10}, "old": {"id": 1, "total": 9.5}, "table": "orders", "schema": "tests"}"#,
                r#"{"op": "DELETE", "new": null, "old": {"id": 1, "total": 10}, "table": "orders", "schema": "tests"}"#,
            ]
            .join("\n")
        );
        // misuse is a clear error
        run("CREATE TRIGGER no_queue AFTER INSERT ON tests.orders FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger()");
        assert_eq!(sqlstate("INSERT INTO tests.orders VALUES (2, 1)"), "22023");
        run("DROP TRIGGER no_queue ON tests.orders");
        run("CREATE TRIGGER per_statement AFTER INSERT ON tests.orders FOR EACH STATEMENT EXECUTE FUNCTION rq_enqueue_trigger('x')");
        assert_eq!(sqlstate("INSERT INTO tests.orders VALUES (3, 1)"), "22023");
    }

    #[pg_test]
    fn every_security_definer_function_pins_its_search_path() {
        let of_extension = "FROM pg_proc p \
             JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e' \
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'raquel' WHERE p.prosecdef";
        assert_eq!(
            one::<i64>(&format!("SELECT count(*) {of_extension}")),
            16,
            "rq_enqueue and rq_enqueue_batch (text and jsonb) and their twins in raquel_internal (text), \
             the turn trigger rq_job_turn, the flow claim's rq_flow_lock and rq_flow_took, rq_emit, \
             the durable verbs rq_step, rq_sleep, rq_wait_event and rq_wait_job, and rq_deliver_job_end"
        );
        let unpinned: i64 = one(&format!(
            "SELECT count(*) {of_extension} \
             AND NOT coalesce(array_to_string(p.proconfig, ',') LIKE '%search_path=%', false)"
        ));
        assert_eq!(unpinned, 0);
        // and nobody but those granted may run them
        let public_may_run: i64 = one(&format!("SELECT count(*) {of_extension} AND has_function_privilege('public', p.oid, 'EXECUTE')"));
        assert_eq!(public_may_run, 0);
    }

    #[pg_test]
    fn claims_of_many_batch_sizes_in_one_backend_all_work() {
        // A backend keeps the plans of a few batch sizes and plans the rest
        // on each call (src/statements.rs); both must hand out the right jobs.
        run("SELECT rq_enqueue_batch('sizes', ARRAY(SELECT 'p' || g FROM generate_series(1, 300) g))");
        let mut claimed = 0;
        for batch in 1..=20 {
            for queues in ["ARRAY['sizes']", "ARRAY['sizes', 'other']", "NULL"] {
                let n: i64 = one(&format!("SELECT count(*) FROM rq_claim({queues}, batch => {batch})"));
                assert_eq!(n, i64::from(batch.min(300 - claimed)), "batch {batch} of {queues}");
                claimed += n as i32;
            }
        }
        assert_eq!(claimed, 300);
        assert_eq!(one::<i64>("SELECT count(*) FROM jobs WHERE status = 'claimed' AND attempts = 1"), 300);
    }

    #[pg_test]
    fn kept_plans_follow_a_changed_table() {
        let first = enqueue("'alter', 'a'");
        assert_eq!(claim_one("alter").as_deref(), Some(first.as_str()));
        run(&format!("SELECT rq_complete('{first}', (SELECT attempts FROM jobs WHERE id = '{first}'))"));
        // A column added and dropped again leaves a dropped attribute in the
        // row type that rq_claim and rq_complete return.
        run("ALTER TABLE jobs ADD COLUMN note text DEFAULT 'n'");
        let second = enqueue("'alter', 'b'");
        assert_eq!(one::<String>("SELECT note FROM rq_claim(ARRAY['alter'])"), "n");
        run("ALTER TABLE jobs DROP COLUMN note");
        run(&format!("SELECT rq_complete('{second}', (SELECT attempts FROM jobs WHERE id = '{second}'))"));
        let third = enqueue("'alter', 'c'");
        assert_eq!(
            one::<String>("SELECT payload || ' ' || status || ' ' || attempts FROM rq_claim(ARRAY['alter'])"),
            "c claimed 1"
        );
        assert_eq!(one::<String>(&format!("SELECT (rq_complete('{third}', (SELECT attempts FROM jobs WHERE id = '{third}'))).status")), "success");
    }

    #[pg_test]
    fn text_and_json_enqueues_in_turn_store_their_payloads() {
        // the two rq_enqueue overloads share one C function and keep a plan each
        for n in 0..3 {
            enqueue(&format!("'turns', 'text {n}'"));
            enqueue(&format!("'turns', '{{\"n\": {n}}}'::jsonb, priority => {n}"));
        }
        assert_eq!(
            one::<String>("SELECT string_agg(payload || '/' || priority, ' | ' ORDER BY id) FROM jobs WHERE queue = 'turns'"),
            r#"text 0/0 | {"n": 0}/0 | text 1/0 | {"n": 1}/1 | text 2/0 | {"n": 2}/2"#
        );
    }

    #[pg_test]
    fn the_kept_plans_are_bounded_and_the_least_recent_goes() {
        // a claim of several queues keeps a plan per batch size (one
        // queue's claims directly, src/direct.rs): more sizes than the bound
        let before: i64 = one("SELECT evicted FROM raquel_internal.rq_kept_plans()");
        let max: i32 = one("SELECT max_kept FROM raquel_internal.rq_kept_plans()");
        enqueue("'plans', 'p'");
        for batch in 1..=(max + 10) {
            run(&format!("SELECT count(*) FROM rq_claim(ARRAY['none of these', 'nor these'], batch => {batch})"));
        }
        let (kept, evicted): (i32, i64) = (
            one("SELECT kept FROM raquel_internal.rq_kept_plans()"),
            one("SELECT evicted FROM raquel_internal.rq_kept_plans()"),
        );
        assert_eq!(kept, max, "the backend keeps as many plans as the bound");
        assert!(evicted - before >= 10, "{} plans evicted for {} new ones past the bound", evicted - before, max + 10);
        // the verbs still work, and a plan used again is kept again
        assert_eq!(claim_one("plans").is_some(), true);
        assert!(one::<i32>("SELECT kept FROM raquel_internal.rq_kept_plans()") <= max);
    }
}
