-- Money leaves the platform (SPEC §12.3): payouts to a bank account's processor token.

-- Each payout, as the user's stream tells it (`PayoutsProjection`).
CREATE TABLE payouts_view (
    payout_id     uuid        PRIMARY KEY,
    user_id       uuid        NOT NULL,
    amount_cents  bigint      NOT NULL,
    status        text        NOT NULL CHECK (status IN ('pending', 'sent', 'failed')),
    transfer_id   text,
    reason        text,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    position      bigint      NOT NULL
);
CREATE INDEX payouts_view_user ON payouts_view (user_id, position);
CREATE INDEX payouts_view_pending ON payouts_view (created_at) WHERE status = 'pending';
GRANT SELECT, INSERT, UPDATE, DELETE ON payouts_view TO lender_app;

-- The payout sandbox's own books: one transfer a key, as a real processor's idempotency keys
-- make it. A token `ba_test_fail` fails.
CREATE TABLE sandbox_transfers (
    transfer_id      text        PRIMARY KEY,
    idempotency_key  text        NOT NULL UNIQUE,
    token            text        NOT NULL,
    amount_cents     bigint      NOT NULL CHECK (amount_cents > 0),
    status           text        NOT NULL CHECK (status IN ('sent', 'failed')),
    created_at       timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON sandbox_transfers TO lender_app;
