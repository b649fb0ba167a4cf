-- Personal data in an append-only log (SPEC §11.3, issue 18): crypto-shredding.

-- Each person's data key, outside the log, wrapped (AES-GCM) by the master key whose id is
-- beside it. Forgetting a person sets `wrapped` to NULL: what the log holds sealed with
-- their key can never be read again. The row stays as a tombstone, so that no new key is
-- made for someone forgotten. `subject` is a user's id, or `blind-index` (the e-mail index's key).
CREATE TABLE data_keys (
    subject         text        PRIMARY KEY,
    wrapped         bytea,
    master_key_id   text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    forgotten_at    timestamptz,
    CHECK ((wrapped IS NULL) = (master_key_id IS NULL)),
    CHECK ((wrapped IS NULL) = (forgotten_at IS NOT NULL))
);
GRANT SELECT, INSERT, UPDATE ON data_keys TO lender_app;

-- One account an e-mail address, without the address: a keyed digest (HMAC-SHA-256 of the
-- lower-cased address, with the `blind-index` data key). Deleted when its user is forgotten.
-- `email_claims` (0013) held addresses in clear: the server moves them here at start.
CREATE TABLE email_index (
    digest          bytea       PRIMARY KEY,
    user_id         uuid        NOT NULL
);
CREATE INDEX email_index_user ON email_index (user_id);
GRANT SELECT, INSERT, DELETE ON email_index TO lender_app;
GRANT DELETE ON email_claims TO lender_app;

-- A forgotten user keeps a row (ids, money, the handle stays taken) with nothing personal.
ALTER TABLE users_view ADD COLUMN forgotten_at timestamptz;

-- Forgetting closes the login; the handle stays claimed.
GRANT UPDATE (password_hash) ON credentials TO lender_app;
