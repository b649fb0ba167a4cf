-- Idempotency-Key on HTTP commands (SPEC §6): per user and key, the request's digest and the
-- response to give again. A row with no status is a claim: its request is being answered.
CREATE TABLE http_idempotency (
    user_id         uuid        NOT NULL,
    key             text        NOT NULL,
    request_hash    text        NOT NULL,
    status          integer,
    content_type    text,
    body            bytea,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    PRIMARY KEY (user_id, key)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON http_idempotency TO lender_app;
