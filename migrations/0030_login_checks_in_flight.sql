-- A login's reserved attempt counted as a failure while its password was being checked, so
-- eight concurrent logins with the right password got three 429s for each other's checks in
-- flight (issue 47). Now an attempt in flight (`checking`) holds a place under the limits
-- without being a failure: when only such attempts fill a limit, the next one waits for them
-- ('busy', polled by the server) instead of being refused; a wrong password settles its row
-- as a failure, a success takes back the pair's settled failures and its own row. A parallel
-- burst of guesses still gets no more checks than a sequence. A row left `checking` by a
-- server that stopped mid-check counts as a failure after a minute (a check takes well under).
ALTER TABLE login_failures ADD COLUMN checking boolean NOT NULL DEFAULT false;
GRANT UPDATE (checking) ON login_failures TO lender_app;

CREATE OR REPLACE FUNCTION reserve_login_attempt(
    p_handle text, p_address text, p_window_seconds integer, p_max_pair integer, p_max_address integer,
    p_max_handle integer)
RETURNS TABLE (outcome text, wait_seconds integer, reservation bigint)
LANGUAGE plpgsql AS $$
DECLARE
    by_pair     bigint;
    by_address  bigint;
    by_handle   bigint;
    in_pair     bigint;
    in_address  bigint;
    in_handle   bigint;
    oldest_pair timestamptz;
    oldest_addr timestamptz;
    oldest_hdl  timestamptz;
    reserved    bigint;
    since       constant timestamptz := now() - make_interval(secs => p_window_seconds);
    stale       constant timestamptz := now() - interval '1 minute';
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('login-handle:' || p_handle, 0))
       OR NOT pg_try_advisory_xact_lock(hashtextextended('login-address:' || p_address, 0)) THEN
        RETURN QUERY SELECT 'busy'::text, 1, NULL::bigint;
        RETURN;
    END IF;
    -- Settled failures (by_*) and every attempt, those in flight too (in_*).
    SELECT count(*) FILTER (WHERE f.handle = p_handle AND f.address = p_address AND settled),
           count(*) FILTER (WHERE f.address = p_address AND settled),
           count(*) FILTER (WHERE f.handle = p_handle AND settled),
           count(*) FILTER (WHERE f.handle = p_handle AND f.address = p_address),
           count(*) FILTER (WHERE f.address = p_address),
           count(*) FILTER (WHERE f.handle = p_handle),
           min(f.at) FILTER (WHERE f.handle = p_handle AND f.address = p_address AND settled),
           min(f.at) FILTER (WHERE f.address = p_address AND settled),
           min(f.at) FILTER (WHERE f.handle = p_handle AND settled)
      INTO by_pair, by_address, by_handle, in_pair, in_address, in_handle, oldest_pair, oldest_addr, oldest_hdl
      FROM login_failures f, LATERAL (SELECT NOT f.checking OR f.at < stale AS settled) s
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
    IF in_pair >= p_max_pair OR in_address >= p_max_address OR in_handle >= p_max_handle THEN
        -- Full only with checks in flight: whether they fail decides this one's turn.
        RETURN QUERY SELECT 'busy'::text, 1, NULL::bigint;
        RETURN;
    END IF;
    DELETE FROM login_failures WHERE at < since;
    INSERT INTO login_failures (handle, address, checking) VALUES (p_handle, p_address, true) RETURNING id INTO reserved;
    RETURN QUERY SELECT 'reserved'::text, 0, reserved;
END
$$;
