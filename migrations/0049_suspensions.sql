-- Suspended users (SPEC §12.5), as their streams tell it: a row while a suspension holds
-- (`until` null: until reinstated). The session lookup reads it beside the session, so a
-- suspended user's writes are refused on every route by one indexed join.
CREATE TABLE suspensions_view (
    user_id       uuid        PRIMARY KEY,
    operator_id   uuid        NOT NULL,
    reason        text        NOT NULL,
    until         timestamptz,
    suspended_at  timestamptz NOT NULL,
    position      bigint      NOT NULL
);
CREATE INDEX suspensions_view_until ON suspensions_view (until) WHERE until IS NOT NULL;
GRANT SELECT, INSERT, UPDATE, DELETE ON suspensions_view TO lender_app;
