-- Webhooks (SPEC §12.6): the log pushed to receivers an operator registers, each event that
-- matches an endpoint's types at least once, in log order, signed with the endpoint's secret.

-- An endpoint keeps its place in the log (`position`: every event up to it delivered, dead-
-- lettered or not of its types). A sender claims a due endpoint (`FOR UPDATE SKIP LOCKED`,
-- then `claimed_until` and `claimed_by`), posts the events after its position in order, and
-- moves the position after each answered 2xx: a crash sends again at most the one in flight.
-- A failure waits `next_attempt_at`, the events behind it too (order holds); after the last
-- try the event goes to `webhook_dead_letters` and the endpoint moves past it.
CREATE TABLE webhooks (
    id               uuid        PRIMARY KEY,
    url              text        NOT NULL,
    types            text[]      NOT NULL,     -- event types, or '*' for every one
    -- The signing secret, which must be kept to sign: sealed (AES-GCM) with a key derived
    -- from the server's secret, so that a copy of the database alone cannot sign.
    secret_sealed    bytea       NOT NULL,
    created_by       uuid        NOT NULL,     -- the operator
    created_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz,              -- no more deliveries; its dead letters stay
    position         bigint      NOT NULL,
    delivered        bigint      NOT NULL DEFAULT 0,
    delivered_at     timestamptz,              -- the last 2xx
    attempts         integer     NOT NULL DEFAULT 0,   -- failed tries of the event after `position`
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    claimed_until    timestamptz,
    claimed_by       uuid,                     -- the sender's round that holds the claim
    last_error       text
);
CREATE INDEX webhooks_due ON webhooks (next_attempt_at) WHERE deleted_at IS NULL;
GRANT SELECT, INSERT, UPDATE ON webhooks TO lender_app;

-- Events an endpoint gave up on after its last try: which, and why, for an operator to replay
-- (`POST /v1/admin/webhooks/{id}/position`) once the receiver is mended.
CREATE TABLE webhook_dead_letters (
    id           bigserial   PRIMARY KEY,
    webhook_id   uuid        NOT NULL REFERENCES webhooks (id),
    position     bigint      NOT NULL,
    event_type   text        NOT NULL,
    attempts     integer     NOT NULL,
    last_error   text        NOT NULL,
    dead_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_dead_letters_webhook ON webhook_dead_letters (webhook_id, position);
GRANT SELECT, INSERT ON webhook_dead_letters TO lender_app;
GRANT USAGE ON SEQUENCE webhook_dead_letters_id_seq TO lender_app;
