-- One account an e-mail address (issue 15), whatever its case: the claim is written in the
-- transaction that registers the user, beside the credentials' claim on the handle. Access
-- control, like credentials: kept outside the log. Accounts made before this keep their
-- addresses; the first of them to register holds the claim.
CREATE TABLE email_claims (
    email           text        PRIMARY KEY CHECK (email = lower(email)),
    user_id         uuid        NOT NULL
);
INSERT INTO email_claims (email, user_id)
SELECT DISTINCT ON (lower(email)) lower(email), user_id FROM users_view ORDER BY lower(email), member_since
ON CONFLICT DO NOTHING;
GRANT SELECT, INSERT ON email_claims TO lender_app;
