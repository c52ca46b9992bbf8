-- What an operator should fix, as rows: rq_warnings() (the dashboard shows
-- them), a WARNING at CREATE EXTENSION and ALTER EXTENSION … UPDATE, and a
-- line in the server log from the background worker (at most one an hour a
-- database, src/worker.rs).
--
-- One so far: roles other than raquel's owner (and superusers) that may
-- create in the extension's schema. raquel never calls a function of its
-- own there (sql/privileges.sql), but a user's own call of rq_claim or
-- rq_complete resolves there, and such a role can plant a look-alike that
-- fits the call better, or one that makes it ambiguous.

-- The roles other than the extension's owner and the superusers that may
-- create in its schema: those granted CREATE (PUBLIC for everyone) and the
-- schema's owner (pg_database_owner, the owner of `public` since
-- PostgreSQL 15, stands for the database's owner).
CREATE FUNCTION raquel_internal.rq_schema_writers() RETURNS SETOF text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH s AS (
        SELECT n.nspowner, coalesce(n.nspacl, acldefault('n', n.nspowner)) AS acl, e.extowner
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'raquel'
    ), creators AS (
        SELECT a.grantee AS role FROM s, aclexplode(s.acl) a WHERE a.privilege_type = 'CREATE'
        UNION
        SELECT s.nspowner FROM s
    ), resolved AS (
        SELECT DISTINCT CASE WHEN c.role = 'pg_database_owner'::regrole
                             THEN (SELECT d.datdba FROM pg_database d WHERE d.datname = current_database())
                             ELSE c.role END AS role
        FROM creators c
    )
    SELECT CASE WHEN r.role = 0 THEN 'PUBLIC' ELSE r.role::regrole::text END
    FROM resolved r, s
    WHERE r.role <> s.extowner
      AND (r.role = 0 OR NOT coalesce((SELECT ro.rolsuper FROM pg_roles ro WHERE ro.oid = r.role), false))
    ORDER BY 1
$$;

-- Each thing to fix, with what to do about it.
CREATE FUNCTION raquel_internal.rq_warnings() RETURNS TABLE (warning text, hint text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('roles other than raquel''s owner may create in its schema %s: %s',
                  '@extschema@', string_agg(w, ', ')),
           format('A function one of them creates there with a raquel name can take over your own calls of raquel''s '
                  'functions (raquel''s own calls are safe). Install raquel into a schema only its owner may create in '
                  '(CREATE SCHEMA raquel; CREATE EXTENSION raquel SCHEMA raquel), or REVOKE CREATE ON SCHEMA %s FROM %s.',
                  '@extschema@', string_agg(w, ', '))
    FROM raquel_internal.rq_schema_writers() w
    HAVING count(*) > 0
$$;

-- The name users call (and the dashboard's page of queues shows).
CREATE FUNCTION rq_warnings() RETURNS TABLE (warning text, hint text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_warnings() $$;

DO $$
DECLARE
    w record;
BEGIN
    FOR w IN SELECT * FROM raquel_internal.rq_warnings() LOOP
        RAISE WARNING 'raquel: %', w.warning USING HINT = w.hint;
    END LOOP;
END
$$;
