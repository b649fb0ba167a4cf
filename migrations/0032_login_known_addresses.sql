-- Failures spread over many addresses lock a handle for everyone (50 in the window), and
-- handles are public: anyone could lock any account out from eleven addresses (issue 48).
-- An address the handle's owner logged in from before keeps its own limits (five failures
-- of the pair, twenty of the address) and is not locked by the handle's: guessers elsewhere cannot lock the owner out of their
-- own devices. Kept for 90 days after the last success there.
CREATE TABLE login_known_addresses (
    handle       text        NOT NULL,
    address      text        NOT NULL,
    last_success timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (handle, address)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON login_known_addresses TO lender_app;

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
    known       boolean;
    reserved    bigint;
    since       constant timestamptz := now() - make_interval(secs => p_window_seconds);
    stale       constant timestamptz := now() - interval '1 minute';
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('login-handle:' || p_handle, 0))
       OR NOT pg_try_advisory_xact_lock(hashtextextended('login-address:' || p_address, 0)) THEN
        RETURN QUERY SELECT 'busy'::text, 1, NULL::bigint;
        RETURN;
    END IF;
    known := EXISTS (SELECT FROM login_known_addresses k
                     WHERE k.handle = p_handle AND k.address = p_address AND k.last_success > now() - interval '90 days');
    -- Settled failures (by_*) and every attempt, those in flight too (in_*), as in 0030.
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
    -- A known address is held to its pair's and its own limits, not the handle's.
    IF known THEN
        by_handle := 0; in_handle := 0;
    END IF;
    IF by_pair >= p_max_pair OR by_address >= p_max_address OR by_handle >= p_max_handle THEN
        RETURN QUERY SELECT
            CASE WHEN by_pair >= p_max_pair THEN 'limited_pair'
                 WHEN by_address >= p_max_address THEN 'limited_address'
                 ELSE 'limited_handle' END,
            greatest(1, ceil(extract(epoch FROM
                CASE WHEN by_pair >= p_max_pair THEN oldest_pair
                     WHEN by_address >= p_max_address THEN oldest_addr
                     ELSE oldest_hdl END
                + make_interval(secs => p_window_seconds) - now())))::integer,
            NULL::bigint;
        RETURN;
    END IF;
    IF in_pair >= p_max_pair OR in_address >= p_max_address OR in_handle >= p_max_handle THEN
        RETURN QUERY SELECT 'busy'::text, 1, NULL::bigint;
        RETURN;
    END IF;
    DELETE FROM login_failures WHERE at < since;
    INSERT INTO login_failures (handle, address, checking) VALUES (p_handle, p_address, true) RETURNING id INTO reserved;
    RETURN QUERY SELECT 'reserved'::text, 0, reserved;
END
$$;
