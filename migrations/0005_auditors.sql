-- Auditors may read every item's bid history and the global log (SPEC §1, §8). Granted by
-- an operator (`lender users grant-auditor HANDLE`), as access control, like credentials.
CREATE TABLE auditors (
    user_id         uuid        PRIMARY KEY,
    granted_at      timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT ON auditors TO lender_app;
