-- The event log: append-only, gapless positions in commit order, per-stream hash chains,
-- idempotency records. See docs/ARCHITECTURE.md ("The event log") for the design.

-- The role the server runs as (`SET ROLE lender_app`): it may read and append, never
-- rewrite. Roles are cluster-wide, so create it once and tolerate a concurrent creator.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lender_app') THEN
        CREATE ROLE lender_app NOLOGIN;
    END IF;
    IF NOT pg_has_role(current_user, 'lender_app', 'MEMBER') THEN
        EXECUTE format('GRANT lender_app TO %I', current_user);
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;
GRANT USAGE ON SCHEMA public TO lender_app;

CREATE TABLE events (
    position        bigint      PRIMARY KEY,
    stream_id       text        NOT NULL,
    stream_version  bigint      NOT NULL CHECK (stream_version > 0),
    type            text        NOT NULL,
    schema_version  integer     NOT NULL CHECK (schema_version > 0),
    data            jsonb       NOT NULL,
    metadata        jsonb       NOT NULL,
    recorded_at     timestamptz NOT NULL,
    transaction_id  xid8        NOT NULL DEFAULT pg_current_xact_id(),
    previous_hash   bytea       NOT NULL,
    hash            bytea       NOT NULL,
    CONSTRAINT events_stream_version_key UNIQUE (stream_id, stream_version)
);

-- Each stream's head: its version and last hash, so a removed last event is noticed too.
CREATE TABLE streams (
    stream_id       text        PRIMARY KEY,
    version         bigint      NOT NULL,
    last_position   bigint      NOT NULL,
    last_hash       bytea       NOT NULL
);

-- The one row every append locks: positions are handed out under it, so they are
-- gapless and in commit order.
CREATE TABLE log_head (
    id              boolean     PRIMARY KEY DEFAULT true CHECK (id),
    position        bigint      NOT NULL
);
INSERT INTO log_head (position) VALUES (0);

CREATE TABLE idempotency_keys (
    actor           text        NOT NULL,
    key             text        NOT NULL,
    request_hash    text        NOT NULL,
    positions       bigint[]    NOT NULL,
    response        jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (actor, key)
);

-- Append-only, enforced by the database itself.
CREATE FUNCTION refuse_event_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the event log is append-only: % is not allowed on events', TG_OP
        USING ERRCODE = 'LX100';
END
$$;
CREATE TRIGGER events_no_update_or_delete BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION refuse_event_change();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_event_change();

-- The canonical bytes an event's hash covers, after its stream's previous hash. One
-- definition, used by append; `EventStore.verify` recomputes the same in Swift.
CREATE FUNCTION event_hash(
    previous bytea, at_position bigint, stream text, version bigint, event_type text,
    schema integer, body jsonb, meta jsonb, recorded timestamptz
) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT sha256(previous || convert_to(
        at_position::text || E'\n' || stream || E'\n' || version::text || E'\n' || event_type || E'\n'
        || schema::text || E'\n' || body::text || E'\n' || meta::text || E'\n'
        || to_char(recorded AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'UTF8'))
$$;

-- Appends a batch of requests in one call: the group commit. Each request is
--   {"streams": [{"streamId", "expected": "any" | "none" | n, "events": [{"type", "schemaVersion", "data"}]}],
--    "metadata": {...}, "idempotency": null | {"actor", "key", "requestHash"}}
-- and gets one row back: outcome 'appended' (detail: positions, versions),
-- 'replayed' (an earlier request with the same key and body: its positions and response),
-- 'key_reused' (same key, other body), 'wrong_expected_version' (streamId, expected,
-- actual), or 'error' (sqlState, message). Each request runs in its own subtransaction,
-- so one failure undoes only its own writes.
CREATE FUNCTION append_batch(requests jsonb)
RETURNS TABLE (request_index integer, outcome text, detail jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    head            bigint;
    head_before     bigint;
    request         jsonb;
    stream          jsonb;
    event           jsonb;
    idem            jsonb;
    existing        idempotency_keys%ROWTYPE;
    current_version bigint;
    current_hash    bytea;
    expected        jsonb;
    new_hash        bytea;
    positions       bigint[];
    versions        jsonb;
    now_at          timestamptz := now();
    genesis         bytea := '\x0000000000000000000000000000000000000000000000000000000000000000';
BEGIN
    SELECT log_head.position INTO head FROM log_head FOR UPDATE;
    request_index := -1;
    FOR request IN SELECT value FROM jsonb_array_elements(requests) LOOP
        request_index := request_index + 1;
        head_before := head;
        BEGIN
            idem := request -> 'idempotency';
            IF idem IS NOT NULL AND jsonb_typeof(idem) = 'object' THEN
                SELECT * INTO existing FROM idempotency_keys k
                    WHERE k.actor = idem ->> 'actor' AND k.key = idem ->> 'key';
                IF FOUND THEN
                    IF existing.request_hash = idem ->> 'requestHash' THEN
                        outcome := 'replayed';
                        detail := jsonb_build_object('positions', to_jsonb(existing.positions), 'response', existing.response);
                    ELSE
                        outcome := 'key_reused';
                        detail := '{}'::jsonb;
                    END IF;
                    RETURN NEXT;
                    CONTINUE;
                END IF;
            END IF;

            positions := '{}';
            versions := '{}'::jsonb;
            FOR stream IN SELECT value FROM jsonb_array_elements(request -> 'streams') LOOP
                SELECT s.version, s.last_hash INTO current_version, current_hash
                    FROM streams s WHERE s.stream_id = stream ->> 'streamId';
                IF NOT FOUND THEN
                    current_version := 0;
                    current_hash := genesis;
                END IF;
                expected := stream -> 'expected';
                IF (expected = '"none"' AND current_version <> 0)
                    OR (jsonb_typeof(expected) = 'number' AND (expected #>> '{}')::bigint <> current_version) THEN
                    RAISE EXCEPTION 'wrong expected version' USING ERRCODE = 'LX001',
                        DETAIL = jsonb_build_object('streamId', stream ->> 'streamId', 'expected', expected,
                                                    'actual', current_version)::text;
                END IF;
                FOR event IN SELECT value FROM jsonb_array_elements(stream -> 'events') LOOP
                    head := head + 1;
                    current_version := current_version + 1;
                    new_hash := event_hash(current_hash, head, stream ->> 'streamId', current_version,
                        event ->> 'type', (event ->> 'schemaVersion')::integer, event -> 'data',
                        request -> 'metadata', now_at);
                    INSERT INTO events (position, stream_id, stream_version, type, schema_version, data,
                                        metadata, recorded_at, previous_hash, hash)
                    VALUES (head, stream ->> 'streamId', current_version, event ->> 'type',
                            (event ->> 'schemaVersion')::integer, event -> 'data', request -> 'metadata',
                            now_at, current_hash, new_hash);
                    current_hash := new_hash;
                    positions := positions || head;
                END LOOP;
                INSERT INTO streams AS s (stream_id, version, last_position, last_hash)
                VALUES (stream ->> 'streamId', current_version, head, current_hash)
                ON CONFLICT (stream_id) DO UPDATE
                    SET version = excluded.version, last_position = excluded.last_position,
                        last_hash = excluded.last_hash;
                versions := versions || jsonb_build_object(stream ->> 'streamId', current_version);
            END LOOP;

            IF idem IS NOT NULL AND jsonb_typeof(idem) = 'object' THEN
                INSERT INTO idempotency_keys (actor, key, request_hash, positions)
                VALUES (idem ->> 'actor', idem ->> 'key', idem ->> 'requestHash', positions);
            END IF;
            outcome := 'appended';
            detail := jsonb_build_object('positions', to_jsonb(positions), 'versions', versions,
                                         'recordedAt', to_char(now_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
            RETURN NEXT;
        EXCEPTION
            WHEN SQLSTATE 'LX001' THEN
                head := head_before;
                GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
                outcome := 'wrong_expected_version';
                RETURN NEXT;
            WHEN OTHERS THEN
                head := head_before;
                outcome := 'error';
                detail := jsonb_build_object('sqlState', SQLSTATE, 'message', SQLERRM);
                RETURN NEXT;
        END;
    END LOOP;
    IF head > (SELECT log_head.position FROM log_head) THEN
        UPDATE log_head SET position = head;
        PERFORM pg_notify('lender_events', head::text);
    END IF;
END
$$;

-- The server may read and append; it may not rewrite the log.
REVOKE ALL ON events FROM PUBLIC;
GRANT SELECT, INSERT ON events TO lender_app;
GRANT SELECT, INSERT, UPDATE ON streams, log_head TO lender_app;
GRANT SELECT, INSERT, UPDATE ON idempotency_keys TO lender_app;
GRANT SELECT ON schema_migrations TO lender_app;
