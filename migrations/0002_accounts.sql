-- Accounts: passwords and sessions, kept out of the event log on purpose (SPEC §3.1).

-- One row per registered user: the handle (unique, so a second claim fails here) and
-- the bcrypt hash of the password. Never the password itself.
CREATE TABLE credentials (
    user_id         uuid        PRIMARY KEY,
    handle          text        NOT NULL CONSTRAINT credentials_handle_key UNIQUE,
    password_hash   text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- Bearer tokens by their SHA-256 only: a leaked table gives no usable token.
CREATE TABLE sessions (
    token_hash      bytea       PRIMARY KEY,
    user_id         uuid        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz
);
CREATE INDEX sessions_user_id ON sessions (user_id);

-- DELETE on credentials undoes a registration whose events could not be appended.
GRANT SELECT, INSERT, DELETE ON credentials TO lender_app;
GRANT SELECT, INSERT, UPDATE ON sessions TO lender_app;
