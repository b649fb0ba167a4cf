-- A rental paid on the platform (SPEC §12.2).

-- The sandbox processor's card authorisations and partial refunds, beside its charges: its
-- own books, outside the log, which reconciliation holds the log against. A capture is a
-- charge (`sandbox_charges`) named by its authorisation.
CREATE TABLE sandbox_authorizations (
    authorization_id   text        PRIMARY KEY,
    idempotency_key    text        NOT NULL UNIQUE,
    token              text        NOT NULL,
    amount_cents       bigint      NOT NULL CHECK (amount_cents > 0),
    created_at         timestamptz NOT NULL DEFAULT now(),
    last_used_at       timestamptz NOT NULL DEFAULT now(),
    captured_charge_id text        REFERENCES sandbox_charges (charge_id),
    voided_at          timestamptz
);
CREATE INDEX sandbox_authorizations_open ON sandbox_authorizations (last_used_at)
    WHERE voided_at IS NULL AND captured_charge_id IS NULL;

CREATE TABLE sandbox_refunds (
    refund_id        text        PRIMARY KEY,
    idempotency_key  text        NOT NULL UNIQUE,
    charge_id        text        NOT NULL REFERENCES sandbox_charges (charge_id),
    amount_cents     bigint      NOT NULL CHECK (amount_cents > 0),
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_refunds_charge ON sandbox_refunds (charge_id);
GRANT SELECT, INSERT, UPDATE ON sandbox_authorizations, sandbox_refunds TO lender_app;

-- The part of each balance held for rental bids.
ALTER TABLE users_view ADD COLUMN held_cents bigint NOT NULL DEFAULT 0;

-- Each rental bid's prices, fixed in its event: shown on the bid and on the booking it became.
CREATE TABLE rental_prices_view (
    bid_id               uuid    PRIMARY KEY,
    days                 integer NOT NULL,
    total_cents          bigint  NOT NULL,
    renter_fee_cents     bigint  NOT NULL,
    owner_fee_cents      bigint  NOT NULL,
    charge_cents         bigint  NOT NULL,
    payout_cents         bigint  NOT NULL,
    cancellation_policy  text    NOT NULL,
    pay_with             text    NOT NULL       -- balance, card
);
GRANT SELECT, INSERT, UPDATE, DELETE ON rental_prices_view TO lender_app;

-- A cancelled booking's division of its charge.
ALTER TABLE bookings_view
    ADD COLUMN refund_cents bigint,
    ADD COLUMN settled_payout_cents bigint,
    ADD COLUMN settled_fees_cents bigint;
