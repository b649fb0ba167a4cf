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

-- Each event's hash is sha256(previous_hash || canonical), where previous_hash is the hash
-- of the stream's previous event (32 zero bytes for the first) and canonical is the UTF-8
-- of position, stream_id, stream_version, type, schema_version, data::text,
-- metadata::text and recorded_at as YYYY-MM-DDTHH:MM:SS.ffffffZ (UTC), joined by
-- newlines. append_batch computes it; EventStore.verify recomputes it in Swift.
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

-- How far each inline projection has applied the log, moved in the appending transaction.
CREATE TABLE projection_checkpoints (
    name            text        PRIMARY KEY,
    position        bigint      NOT NULL
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

-- Appends a batch of requests in one call: the group commit. Each request is
--   {"streams": [{"streamId", "expected": "any" | "none" | n, "events": [{"type", "schemaVersion", "data"}]}],
--    "metadata": {...}, "idempotency": null | {"actor", "key", "requestHash"}}
-- and gets one row back, by outcome: 'appended' (positions written; each stream's new
-- version, in the request's order), 'replayed' (an earlier request with the same key and
-- body: its positions and response), 'key_reused' (same key, other body), or
-- 'wrong_expected_version' (conflict_stream and its actual version).
--
-- Set-based, because every statement costs an executor start: one query loads the heads
-- of every stream the batch names, one loads every key it names; the requests are then
-- decided in order in memory (a request is checked in full before it takes anything, so
-- a refused one leaves no trace and needs no subtransaction); then one INSERT writes all
-- events, one the stream heads, one the keys. Any error fails the whole statement, and
-- the caller retries the requests one by one. The event hash is documented at the top.
CREATE FUNCTION append_batch(requests jsonb)
RETURNS TABLE (request_index integer, outcome text, positions bigint[], versions bigint[],
               conflict_stream text, actual bigint, response jsonb, appended_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    genesis     constant bytea := '\x0000000000000000000000000000000000000000000000000000000000000000';
    now_at      constant timestamptz := now();
    now_text    constant text := to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
    head        bigint;
    first_head  bigint;
    -- Stream heads, loaded once and kept current as the batch appends.
    h_ids       text[];
    h_versions  bigint[];
    h_hashes    bytea[];
    h_positions bigint[];
    h_loaded    bigint[];
    names       text[];
    actors      text[];
    keys        text[];
    -- Idempotency keys: those stored, then those this batch adds.
    k_ids       text[];
    k_hashes    text[];
    k_positions jsonb[];
    k_responses jsonb[];
    n_actors    text[] := '{}';
    n_keys      text[] := '{}';
    n_hashes    text[] := '{}';
    n_positions jsonb[] := '{}';
    -- The events to write.
    e_positions bigint[] := '{}';
    e_streams   text[] := '{}';
    e_versions  bigint[] := '{}';
    e_types     text[] := '{}';
    e_schemas   integer[] := '{}';
    e_data      jsonb[] := '{}';
    e_metadata  jsonb[] := '{}';
    e_previous  bytea[] := '{}';
    e_hashes    bytea[] := '{}';
    request     jsonb;
    stream_list jsonb;
    stream      jsonb;
    event_list  jsonb;
    event       jsonb;
    idem        jsonb;
    meta        jsonb;
    key_id      text;
    slot        integer;
    stream_name text;
    expected    jsonb;
    v_version   bigint;
    v_hash      bytea;
BEGIN
    SELECT l.position INTO head FROM log_head l FOR UPDATE;
    first_head := head;
    appended_at := now_at;

    -- The names first, as arrays: `= ANY(array)` is an index scan whatever the plan, where
    -- a subquery over the parameter can turn into a scan of the whole table.
    SELECT coalesce(array_agg(x ->> 'streamId'), '{}') INTO names
      FROM jsonb_array_elements(requests) r, jsonb_array_elements(r -> 'streams') x;
    SELECT coalesce(array_agg(s.stream_id), '{}'), coalesce(array_agg(s.version), '{}'),
           coalesce(array_agg(s.last_hash), '{}'), coalesce(array_agg(s.last_position), '{}')
      INTO h_ids, h_versions, h_hashes, h_positions
      FROM streams s
     WHERE s.stream_id = ANY(names);
    h_loaded := h_versions;

    SELECT coalesce(array_agg(r -> 'idempotency' ->> 'actor'), '{}'), coalesce(array_agg(r -> 'idempotency' ->> 'key'), '{}')
      INTO actors, keys
      FROM jsonb_array_elements(requests) r
     WHERE jsonb_typeof(r -> 'idempotency') = 'object';
    k_ids := '{}';
    k_hashes := '{}';
    k_positions := '{}';
    k_responses := '{}';
    IF cardinality(keys) > 0 THEN
        -- May bring back another actor's key of the same name too; lookups are by (actor, key).
        SELECT coalesce(array_agg(jsonb_build_array(k.actor, k.key)::text), '{}'), coalesce(array_agg(k.request_hash), '{}'),
               coalesce(array_agg(to_jsonb(k.positions)), '{}'), coalesce(array_agg(k.response), '{}')
          INTO k_ids, k_hashes, k_positions, k_responses
          FROM idempotency_keys k
         WHERE k.actor = ANY(actors) AND k.key = ANY(keys);
    END IF;

    FOR i IN 0 .. jsonb_array_length(requests) - 1 LOOP
        request_index := i;
        request := requests -> i;
        positions := NULL;
        versions := NULL;
        conflict_stream := NULL;
        actual := NULL;
        response := NULL;

        idem := request -> 'idempotency';
        IF jsonb_typeof(idem) = 'object' THEN
            key_id := jsonb_build_array(idem ->> 'actor', idem ->> 'key')::text;
            slot := array_position(k_ids, key_id);
            IF slot IS NOT NULL THEN
                outcome := CASE WHEN k_hashes[slot] = idem ->> 'requestHash' THEN 'replayed' ELSE 'key_reused' END;
                positions := ARRAY(SELECT jsonb_array_elements_text(k_positions[slot])::bigint);
                response := k_responses[slot];
                RETURN NEXT;
                CONTINUE;
            END IF;
        ELSE
            idem := NULL;
        END IF;

        -- Every stream's expected version, before anything is taken.
        stream_list := request -> 'streams';
        FOR s IN 0 .. jsonb_array_length(stream_list) - 1 LOOP
            stream := stream_list -> s;
            slot := array_position(h_ids, stream ->> 'streamId');
            v_version := coalesce(h_versions[slot], 0);
            expected := stream -> 'expected';
            IF (expected = '"none"' AND v_version <> 0)
                OR (jsonb_typeof(expected) = 'number' AND (expected #>> '{}')::bigint <> v_version) THEN
                conflict_stream := stream ->> 'streamId';
                actual := v_version;
                EXIT;
            END IF;
        END LOOP;
        IF conflict_stream IS NOT NULL THEN
            outcome := 'wrong_expected_version';
            RETURN NEXT;
            CONTINUE;
        END IF;

        meta := request -> 'metadata';
        positions := '{}';
        versions := '{}';
        FOR s IN 0 .. jsonb_array_length(stream_list) - 1 LOOP
            stream := stream_list -> s;
            stream_name := stream ->> 'streamId';
            slot := array_position(h_ids, stream_name);
            IF slot IS NULL THEN
                h_ids := h_ids || stream_name;
                h_versions := h_versions || 0::bigint;
                h_hashes := h_hashes || genesis;
                h_positions := h_positions || 0::bigint;
                h_loaded := h_loaded || 0::bigint;
                slot := cardinality(h_ids);
            END IF;
            v_version := h_versions[slot];
            v_hash := h_hashes[slot];
            event_list := stream -> 'events';
            FOR e IN 0 .. jsonb_array_length(event_list) - 1 LOOP
                event := event_list -> e;
                head := head + 1;
                v_version := v_version + 1;
                e_previous := e_previous || v_hash;
                -- The canonical bytes: see the comment on the events table.
                v_hash := sha256(v_hash || convert_to(
                    head::text || E'\n' || stream_name || E'\n' || v_version::text || E'\n' || (event ->> 'type')
                    || E'\n' || ((event ->> 'schemaVersion')::integer)::text || E'\n' || (event -> 'data')::text
                    || E'\n' || meta::text || E'\n' || now_text, 'UTF8'));
                e_positions := e_positions || head;
                e_streams := e_streams || stream_name;
                e_versions := e_versions || v_version;
                e_types := e_types || (event ->> 'type');
                e_schemas := e_schemas || (event ->> 'schemaVersion')::integer;
                e_data := e_data || (event -> 'data');
                e_metadata := e_metadata || meta;
                e_hashes := e_hashes || v_hash;
                positions := positions || head;
            END LOOP;
            h_versions[slot] := v_version;
            h_hashes[slot] := v_hash;
            h_positions[slot] := head;
            versions := versions || v_version;
        END LOOP;

        IF idem IS NOT NULL THEN
            k_ids := k_ids || key_id;
            k_hashes := k_hashes || (idem ->> 'requestHash');
            k_positions := k_positions || to_jsonb(positions);
            k_responses := k_responses || NULL::jsonb;
            n_actors := n_actors || (idem ->> 'actor');
            n_keys := n_keys || (idem ->> 'key');
            n_hashes := n_hashes || (idem ->> 'requestHash');
            n_positions := n_positions || to_jsonb(positions);
        END IF;
        outcome := 'appended';
        RETURN NEXT;
    END LOOP;

    IF head > first_head THEN
        INSERT INTO events (position, stream_id, stream_version, type, schema_version, data, metadata,
                            recorded_at, previous_hash, hash)
        SELECT u.p, u.s, u.v, u.t, u.sv, u.d, u.m, now_at, u.ph, u.h
          FROM unnest(e_positions, e_streams, e_versions, e_types, e_schemas, e_data, e_metadata, e_previous, e_hashes)
               AS u(p, s, v, t, sv, d, m, ph, h);
        INSERT INTO streams AS st (stream_id, version, last_position, last_hash)
        SELECT u.id, u.v, u.p, u.h
          FROM unnest(h_ids, h_versions, h_positions, h_hashes, h_loaded) AS u(id, v, p, h, loaded)
         WHERE u.v > u.loaded
        ON CONFLICT (stream_id) DO UPDATE
            SET version = excluded.version, last_position = excluded.last_position, last_hash = excluded.last_hash;
        UPDATE log_head SET position = head;
        PERFORM pg_notify('lender_events', head::text);
    END IF;
    IF cardinality(n_keys) > 0 THEN
        INSERT INTO idempotency_keys (actor, key, request_hash, positions)
        SELECT u.a, u.k, u.h, ARRAY(SELECT jsonb_array_elements_text(u.p)::bigint)
          FROM unnest(n_actors, n_keys, n_hashes, n_positions) AS u(a, k, h, p);
    END IF;
END
$$;

-- The server may read and append; it may not rewrite the log.
REVOKE ALL ON events FROM PUBLIC;
GRANT SELECT, INSERT ON events TO lender_app;
GRANT SELECT, INSERT, UPDATE ON streams, log_head TO lender_app;
GRANT SELECT, INSERT, UPDATE ON idempotency_keys TO lender_app;
GRANT SELECT, INSERT, UPDATE ON projection_checkpoints TO lender_app;
GRANT SELECT ON schema_migrations TO lender_app;
