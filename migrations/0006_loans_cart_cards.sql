-- Views of loans, carts, cards and balances (SPEC §5), written from events only, in the
-- transaction that appends them, like 0003's.

-- Folded from the user's stream: deposits and credits in, checkouts paid from it out.
ALTER TABLE users_view ADD COLUMN balance_cents bigint NOT NULL DEFAULT 0;

-- What may be kept of a card (SPEC §4): never the number, never the CVV.
CREATE TABLE cards_view (
    card_id             uuid        PRIMARY KEY,
    user_id             uuid        NOT NULL,
    network             text        NOT NULL,
    last4               text        NOT NULL CHECK (last4 ~ '^[0-9]{4}$'),
    exp_month           integer     NOT NULL,
    exp_year            integer     NOT NULL,
    added_at            timestamptz NOT NULL
);
CREATE INDEX cards_view_user ON cards_view (user_id, added_at);

CREATE TABLE loans_view (
    loan_id             uuid        PRIMARY KEY,
    borrower_id         uuid        NOT NULL,
    title               text        NOT NULL,
    description         text        NOT NULL,
    sector              text        NOT NULL,
    activity            text        NOT NULL,
    country_code        text        NOT NULL,
    lat                 double precision NOT NULL,
    lng                 double precision NOT NULL,
    earth               cube        GENERATED ALWAYS AS (earth_point(lat, lng)) STORED,
    place               text        NOT NULL,
    amount_cents        integer     NOT NULL,
    funded_cents        integer     NOT NULL DEFAULT 0,
    repaid_cents        integer     NOT NULL DEFAULT 0,
    lender_count        integer     NOT NULL DEFAULT 0,
    status              text        NOT NULL,
    deadline            date        NOT NULL,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    position            bigint      NOT NULL
);
CREATE INDEX loans_view_newest ON loans_view (created_at DESC, loan_id DESC);
CREATE INDEX loans_view_earth ON loans_view USING gist (earth);
CREATE INDEX loans_view_borrower ON loans_view (borrower_id);
-- `lender loans expire` looks for these.
CREATE INDEX loans_view_deadline ON loans_view (deadline) WHERE status = 'fundraising';

-- Each lender's shares of a loan, and what the repayments credited them.
CREATE TABLE loan_shares_view (
    loan_id             uuid        NOT NULL,
    lender_id           uuid        NOT NULL,
    amount_cents        integer     NOT NULL,
    repaid_cents        integer     NOT NULL DEFAULT 0,
    first_bought_at     timestamptz NOT NULL,
    PRIMARY KEY (loan_id, lender_id)
);
CREATE INDEX loan_shares_view_lender ON loan_shares_view (lender_id, first_bought_at);

CREATE TABLE cart_lines_view (
    user_id             uuid        NOT NULL,
    loan_id             uuid        NOT NULL,
    amount_cents        integer     NOT NULL,
    added_at            timestamptz NOT NULL,
    -- The order lines were added in; ties within one transaction broken by position.
    position            bigint      NOT NULL,
    PRIMARY KEY (user_id, loan_id)
);

-- Fundraising loans per country; countries with none have no row.
CREATE TABLE country_loans_view (
    country_code        text        PRIMARY KEY,
    fundraising_loans   integer     NOT NULL
);

GRANT SELECT, INSERT, UPDATE, DELETE
    ON cards_view, loans_view, loan_shares_view, cart_lines_view, country_loans_view TO lender_app;
