-- Trust and safety, first part (SPEC §12.5): reports on streams of their own, and operators.
-- Operators are granted by `lender users grant-operator HANDLE`, as access control, like
-- auditors; what they do is an event whose actor is the operator.
CREATE TABLE operators (
    user_id         uuid        PRIMARY KEY,
    granted_at      timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON operators TO lender_app;

-- Each report as its stream tells it: filed, then resolved by an operator.
CREATE TABLE reports_view (
    report_id     uuid        PRIMARY KEY,
    reporter_id   uuid        NOT NULL,
    subject_type  text        NOT NULL CHECK (subject_type IN ('item', 'loan', 'user', 'review', 'message')),
    subject_id    uuid        NOT NULL,
    reason        text        NOT NULL,
    text          text,
    status        text        NOT NULL CHECK (status IN ('open', 'resolved')),
    action        text,
    resolution    text,
    resolved_by   uuid,
    created_at    timestamptz NOT NULL,
    resolved_at   timestamptz,
    -- The filing's log position (a list's order and cursor), and the last change's.
    filed_position bigint     NOT NULL,
    position      bigint      NOT NULL
);
-- One open report a person a subject: the append of a second fails here, even in a race.
CREATE UNIQUE INDEX reports_view_open_once ON reports_view (reporter_id, subject_type, subject_id) WHERE status = 'open';
CREATE INDEX reports_view_reporter_newest ON reports_view (reporter_id, filed_position DESC);
CREATE INDEX reports_view_status_newest ON reports_view (status, filed_position DESC);
GRANT SELECT, INSERT, UPDATE, DELETE ON reports_view TO lender_app;

-- A review is named by its deal and its side; a report names it by one id, made from those.
ALTER TABLE reviews_view ADD COLUMN review_id uuid GENERATED ALWAYS AS (md5(bid_id::text || ':' || role)::uuid) STORED;
CREATE UNIQUE INDEX reviews_view_review_id ON reviews_view (review_id);
