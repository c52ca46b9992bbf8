-- Every object of the raquel extension as lines of text, for comparing two
-- installs (tests/upgrade.rs): the extension's members; its schemas
-- (raquel_internal) with their grants and comments; each function's schema,
-- whole definition (arguments with defaults, result, language, volatility,
-- strictness, security, parallel safety, cost, rows, SET configuration and
-- body), grants and comment; each table's and view's columns, defaults,
-- constraints, indexes, triggers, storage options, grants, comments and view
-- definition; the tables pg_dump keeps. Names, never OIDs.
WITH ext AS (
    SELECT e.oid, e.extversion, e.extconfig FROM pg_extension e WHERE e.extname = 'raquel'
), members AS (
    SELECT d.classid, d.objid FROM pg_depend d, ext
    WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
), functions AS (
    SELECT p.* FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
), relations AS (
    SELECT c.* FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
)
SELECT 'version ' || extversion FROM ext
UNION ALL
SELECT 'member ' || pg_describe_object(m.classid, m.objid, 0) FROM members m
UNION ALL
SELECT 'config table ' || c::regclass::text FROM ext, unnest(ext.extconfig) c
UNION ALL
SELECT 'function in schema ' || f.pronamespace::regnamespace::text || ' ' || pg_get_functiondef(f.oid) || E'\n  grants ' || coalesce(f.proacl::text, 'default')
       || E'\n  comment ' || coalesce(obj_description(f.oid, 'pg_proc'), '')
FROM functions f
UNION ALL
SELECT format('schema %s grants %s comment %s', n.nspname, coalesce(n.nspacl::text, 'default'),
              coalesce(obj_description(n.oid, 'pg_namespace'), ''))
FROM pg_namespace n JOIN members m ON m.classid = 'pg_namespace'::regclass AND m.objid = n.oid
UNION ALL
SELECT format('relation %s kind %s options %s grants %s comment %s', r.relname, r.relkind,
              coalesce(r.reloptions::text, ''), coalesce(r.relacl::text, 'default'),
              coalesce(obj_description(r.oid, 'pg_class'), ''))
FROM relations r
UNION ALL
SELECT format('column %s.%s #%s %s not null %s default %s comment %s', r.relname, a.attname,
              row_number() OVER (PARTITION BY r.oid ORDER BY a.attnum),
              format_type(a.atttypid, a.atttypmod), a.attnotnull,
              coalesce(pg_get_expr(ad.adbin, ad.adrelid), ''), coalesce(col_description(r.oid, a.attnum), ''))
FROM relations r
JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef ad ON ad.adrelid = r.oid AND ad.adnum = a.attnum
UNION ALL
SELECT format('constraint %s.%s %s', r.relname, con.conname, pg_get_constraintdef(con.oid))
FROM relations r JOIN pg_constraint con ON con.conrelid = r.oid
UNION ALL
SELECT format('index %s options %s', pg_get_indexdef(i.indexrelid), coalesce(ic.reloptions::text, ''))
FROM relations r JOIN pg_index i ON i.indrelid = r.oid JOIN pg_class ic ON ic.oid = i.indexrelid
UNION ALL
SELECT format('trigger %s enabled %s', pg_get_triggerdef(t.oid), t.tgenabled)
FROM relations r JOIN pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
UNION ALL
SELECT format('view %s %s', r.relname, pg_get_viewdef(r.oid)) FROM relations r WHERE r.relkind = 'v'
ORDER BY 1
