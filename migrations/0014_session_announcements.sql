-- Servers keep the sessions they checked in memory for a few seconds (issue 17). Every change
-- to a session (a logout, an expiry moved, a row removed) is announced on lender_sessions with
-- the token's digest in hex, so that every server forgets it at once rather than at the end
-- of its cache's lifetime.
CREATE FUNCTION announce_session_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
    PERFORM pg_notify('lender_sessions', encode(OLD.token_hash, 'hex'));
    RETURN NULL;
END
$$;

CREATE TRIGGER sessions_announce_change
    AFTER UPDATE OF revoked_at, expires_at, token_hash, user_id OR DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION announce_session_change();
