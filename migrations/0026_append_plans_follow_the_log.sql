-- append_batch plans each of its statements at each call, with the batch's own values.
-- PL/pgSQL keeps a session's plans, and may settle on a generic one. Made after `streams`
-- was analyzed while it was a page or two (autovacuum does so soon after a log's first
-- rows), that plan scans the table for `stream_id = ANY(names)`, and keeps scanning it as it
-- grows, until the next analysis. In one bench run out of three the flusher's session read
-- the whole table, 24,000 rows by the end, at every batch: half the commands' throughput
-- (`perf` on PostgreSQL, pg_stat_user_tables.seq_tup_read). Planned with the values, the
-- lookups are index scans once the table is more than a few pages. Planning costs tens of
-- microseconds a batch, not a command. AppendPlanTests holds it.
ALTER FUNCTION append_batch(jsonb) SET plan_cache_mode = force_custom_plan;
