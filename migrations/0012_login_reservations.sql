-- A login attempt is counted before its password is checked (SPEC §6, issue 15): one call
-- takes its handle's and its address's locks without waiting (a busy one answers 'busy', and
-- the server tries again a moment later without holding a connection), counts the recent
-- failures by pair, by address and by handle, and, under the limits, records this attempt as
-- a failure until a success takes it back. So a parallel burst gets no more password checks
-- than a sequence, and waiting attempts never hold the pool's connections.
-- Each attempt's row has an id, so that an attempt that ends in neither a success nor a
-- wrong password (the server was busy, the database failed) takes back exactly its own row.
ALTER TABLE login_failures ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
CREATE INDEX login_failures_id ON login_failures (id);

CREATE FUNCTION reserve_login_attempt(
    p_handle text, p_address text, p_window_seconds integer, p_max_pair integer, p_max_address integer,
    p_max_handle integer)
RETURNS TABLE (outcome text, wait_seconds integer, reservation bigint)
LANGUAGE plpgsql AS $$
DECLARE
    by_pair     bigint;
    by_address  bigint;
    by_handle   bigint;
    oldest_pair timestamptz;
    oldest_addr timestamptz;
    oldest_hdl  timestamptz;
    reserved    bigint;
    since       constant timestamptz := now() - make_interval(secs => p_window_seconds);
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('login-handle:' || p_handle, 0))
       OR NOT pg_try_advisory_xact_lock(hashtextextended('login-address:' || p_address, 0)) THEN
        RETURN QUERY SELECT 'busy'::text, 1, NULL::bigint;
        RETURN;
    END IF;
    SELECT count(*) FILTER (WHERE f.handle = p_handle AND f.address = p_address),
           count(*) FILTER (WHERE f.address = p_address),
           count(*) FILTER (WHERE f.handle = p_handle),
           min(f.at) FILTER (WHERE f.handle = p_handle AND f.address = p_address),
           min(f.at) FILTER (WHERE f.address = p_address),
           min(f.at) FILTER (WHERE f.handle = p_handle)
      INTO by_pair, by_address, by_handle, oldest_pair, oldest_addr, oldest_hdl
      FROM login_failures f
     WHERE f.at > since AND (f.handle = p_handle OR f.address = p_address);
    IF by_pair >= p_max_pair OR by_address >= p_max_address OR by_handle >= p_max_handle THEN
        RETURN QUERY SELECT
            CASE WHEN by_pair >= p_max_pair THEN 'limited_pair'
                 WHEN by_address >= p_max_address THEN 'limited_address'
                 ELSE 'limited_handle' END,
            -- Until the oldest failure of the limit that was hit leaves the window.
            greatest(1, ceil(extract(epoch FROM
                CASE WHEN by_pair >= p_max_pair THEN oldest_pair
                     WHEN by_address >= p_max_address THEN oldest_addr
                     ELSE oldest_hdl END
                + make_interval(secs => p_window_seconds) - now())))::integer,
            NULL::bigint;
        RETURN;
    END IF;
    DELETE FROM login_failures WHERE at < since;
    INSERT INTO login_failures (handle, address) VALUES (p_handle, p_address) RETURNING id INTO reserved;
    RETURN QUERY SELECT 'reserved'::text, 0, reserved;
END
$$;
REVOKE ALL ON FUNCTION reserve_login_attempt(text, text, integer, integer, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION reserve_login_attempt(text, text, integer, integer, integer, integer) TO lender_app;
