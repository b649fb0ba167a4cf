-- Money moves exactly once (SPEC §11.1).

-- An HTTP Idempotency-Key is now written in the transaction that appends its command's events,
-- as a row of the event store's own `idempotency_keys` (0001): the separate claim-and-store
-- table it replaces could release a key after its command had committed.
DROP TABLE http_idempotency;

-- A command that decided nothing still holds its key: a row with no positions, which the
-- server inserts outside `append_batch` (0001 granted the rest: the response of a command
-- across streams is written in the append's transaction, after `append_batch`).
GRANT SELECT, INSERT ON idempotency_keys TO lender_app;

-- Where the log stood when money began to move exactly once: the money audit holds charges
-- before it against no processor books (the first release's sandbox kept none), and counts
-- repayments before it, which nobody paid, as money created then rather than as imbalances.
CREATE TABLE money_epoch (
    id              boolean     PRIMARY KEY DEFAULT true CHECK (id),
    position        bigint      NOT NULL
);
INSERT INTO money_epoch (position) SELECT position FROM log_head;
GRANT SELECT ON money_epoch TO lender_app;

-- The sandbox payment processor's own books, outside the log, as a real provider keeps them:
-- one row a charge, found again by its idempotency key, so that a retried charge is the same
-- charge; a refund marks its row. `lender payments reconcile` compares these with the log.
CREATE TABLE sandbox_charges (
    charge_id       text        PRIMARY KEY,
    idempotency_key text        NOT NULL UNIQUE,
    token           text        NOT NULL,
    amount_cents    bigint      NOT NULL CHECK (amount_cents > 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- Moved by every retry of the charge: reconciliation leaves a charge alone while a
    -- request may still be recording it.
    last_used_at    timestamptz NOT NULL DEFAULT now(),
    refunded_at     timestamptz
);
CREATE INDEX sandbox_charges_unrefunded ON sandbox_charges (last_used_at) WHERE refunded_at IS NULL;
GRANT SELECT, INSERT, UPDATE ON sandbox_charges TO lender_app;

-- Card adds and card charges per user per hour, so the service cannot be used to test stolen
-- card numbers. One row a user, kind and hour, counted up in one statement: atomic at any
-- concurrency. Access control, like login_failures, not a fact of the marketplace.
CREATE TABLE payment_attempts (
    user_id         uuid        NOT NULL,
    kind            text        NOT NULL,
    window_start    timestamptz NOT NULL,
    attempts        integer     NOT NULL,
    PRIMARY KEY (user_id, kind, window_start)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON payment_attempts TO lender_app;
