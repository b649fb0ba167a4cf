-- Reaching people outside the app (SPEC §12.4): e-mail through an outbox, password resets,
-- e-mail verification.

-- Mail to send, written in the transaction that causes it: nothing for a command that rolled
-- back, nothing lost for one that committed. A sender claims due rows (`FOR UPDATE SKIP
-- LOCKED`, then `claimed_until`), sends, and marks them sent; a row whose sender died is
-- claimed again once its claim lapses: at least once, its Message-ID the same each time.
-- In order per recipient: a row waits while an older one to the same address is unsent.
CREATE TABLE outbox (
    id               bigserial   PRIMARY KEY,
    user_id          uuid,                     -- whom it is for: deleted when they are forgotten
    recipient        text        NOT NULL,
    kind             text        NOT NULL,     -- password_reset, email_verification, ...
    subject          text        NOT NULL,
    text_body        text        NOT NULL,
    html_body        text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    claimed_until    timestamptz,
    sent_at          timestamptz,
    dead_at          timestamptz,              -- given up after the last try
    last_error       text
);
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE sent_at IS NULL AND dead_at IS NULL;
CREATE INDEX outbox_recipient ON outbox (recipient, id) WHERE sent_at IS NULL AND dead_at IS NULL;
CREATE INDEX outbox_user ON outbox (user_id);
CREATE INDEX outbox_sent ON outbox (sent_at) WHERE sent_at IS NOT NULL;
GRANT SELECT, INSERT, UPDATE, DELETE ON outbox TO lender_app;
GRANT USAGE ON SEQUENCE outbox_id_seq TO lender_app;

-- Password reset tokens, as digests: single use, an hour.
CREATE TABLE password_resets (
    token_digest  bytea       PRIMARY KEY,
    user_id       uuid        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz
);
CREATE INDEX password_resets_user ON password_resets (user_id, created_at);
GRANT SELECT, INSERT, UPDATE, DELETE ON password_resets TO lender_app;

-- One e-mail verification code a user at a time, as a digest: 30 minutes, 5 wrong tries.
CREATE TABLE email_codes (
    user_id       uuid        PRIMARY KEY,
    code_digest   bytea       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    wrong_tries   integer     NOT NULL DEFAULT 0
);
GRANT SELECT, INSERT, UPDATE, DELETE ON email_codes TO lender_app;

ALTER TABLE users_view ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
