-- Failed logins, for rate limiting per handle and per client address (SPEC §6: 429). Access
-- control, like credentials, not a fact of the marketplace: kept outside the log. Rows older
-- than the window no longer count, and are removed as new failures arrive.
CREATE TABLE login_failures (
    handle          text        NOT NULL,
    address         text        NOT NULL,
    at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_handle ON login_failures (handle, at);
CREATE INDEX login_failures_address ON login_failures (address, at);

GRANT SELECT, INSERT, DELETE ON login_failures TO lender_app;
