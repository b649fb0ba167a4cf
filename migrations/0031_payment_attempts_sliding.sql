-- Card adds and card charges per user, counted over the last hour rather than the clock's
-- hour (issue 47): a user refused at 10:59 was told to wait 1 s, one refused at 10:01 to
-- wait 59 minutes, and ten at 10:59 plus ten at 11:00 went through. One row an attempt; a
-- refused attempt is not one, so asking again does not put the wait off. Under a lock on the
-- user and kind, so a burst counts as a sequence does.
CREATE TABLE payment_attempt_times (
    user_id  uuid        NOT NULL,
    kind     text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payment_attempt_times_user ON payment_attempt_times (user_id, kind, at);
GRANT SELECT, INSERT, DELETE ON payment_attempt_times TO lender_app;

CREATE FUNCTION reserve_payment_attempt(p_user uuid, p_kind text, p_per_hour integer)
RETURNS TABLE (allowed boolean, wait_seconds integer)
LANGUAGE plpgsql AS $$
DECLARE
    made    bigint;
    oldest  timestamptz;
    since   constant timestamptz := now() - interval '1 hour';
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('payment-attempt:' || p_user || ':' || p_kind, 0));
    DELETE FROM payment_attempt_times WHERE user_id = p_user AND kind = p_kind AND at <= since;
    SELECT count(*), min(at) INTO made, oldest FROM payment_attempt_times WHERE user_id = p_user AND kind = p_kind;
    IF made >= p_per_hour THEN
        -- Until the oldest of them is an hour old.
        RETURN QUERY SELECT false, greatest(1, ceil(extract(epoch FROM oldest + interval '1 hour' - now())))::integer;
        RETURN;
    END IF;
    INSERT INTO payment_attempt_times (user_id, kind) VALUES (p_user, p_kind);
    RETURN QUERY SELECT true, 0;
END
$$;
REVOKE ALL ON FUNCTION reserve_payment_attempt(uuid, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION reserve_payment_attempt(uuid, text, integer) TO lender_app;

DROP TABLE payment_attempts;
