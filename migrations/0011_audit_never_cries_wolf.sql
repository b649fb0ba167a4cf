-- An audit that never cries wolf, and a log that cannot be quietly cut (SPEC §11.2).

-- The time of the last append, so that the next one is never earlier: `recorded_at` was
-- `now()`, the transaction's start, taken before the head's lock, so a batch that waited
-- at the lock could be stamped before the one it followed, and `replay --until TIME` could
-- cut at the wrong place. Events already written keep their times (they are hashed).
-- Times were out of order by a lock wait at most, so the last 100,000 positions hold the
-- latest one (read through the primary key, not a scan of the log).
ALTER TABLE log_head ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT '-infinity';
UPDATE log_head h SET recorded_at = coalesce(
    (SELECT max(e.recorded_at) FROM events e WHERE e.position > h.position - 100000), '-infinity');

-- append_batch as in 0001, with three changes: a stream of a request may come with no
-- events, its expected version then only checked (a decision that read another stream, such
-- as the owner's blocks for a bid, is written only if that stream is still as read); it runs as its owner (SECURITY DEFINER), the
-- one way the server's role can write the log, the stream heads and the log head; and an
-- event's time is taken under the head's lock and never goes back (see above). The search
-- path is pinned, as a SECURITY DEFINER function's must be, so no caller's schema can
-- stand in for the log's tables; and nobody but the owner may create objects in `public`
-- (PostgreSQL 15's default, not older clusters'), where a function of the caller's, an
-- exact match for one append_batch calls, would otherwise run as the owner.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
CREATE OR REPLACE FUNCTION append_batch(requests jsonb)
RETURNS TABLE (request_index integer, outcome text, positions bigint[], versions bigint[],
               conflict_stream text, actual bigint, response jsonb, appended_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    genesis     constant bytea := '\x0000000000000000000000000000000000000000000000000000000000000000';
    now_at      timestamptz;
    now_text    text;
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
    -- The time is taken under the lock, and never before the last batch's: times follow positions.
    SELECT l.position, greatest(clock_timestamp(), l.recorded_at) INTO head, now_at FROM log_head l FOR UPDATE;
    now_text := to_char(now_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
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
            -- A stream with no events is only checked (its expected version); it keeps its head.
            IF jsonb_array_length(event_list) > 0 THEN
                h_positions[slot] := head;
            END IF;
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
        UPDATE log_head SET position = head, recorded_at = now_at;
        PERFORM pg_notify('lender_events', head::text);
    END IF;
    IF cardinality(n_keys) > 0 THEN
        INSERT INTO idempotency_keys (actor, key, request_hash, positions)
        SELECT u.a, u.k, u.h, ARRAY(SELECT jsonb_array_elements_text(u.p)::bigint)
          FROM unnest(n_actors, n_keys, n_hashes, n_positions) AS u(a, k, h, p);
    END IF;
END
$$;

-- A command that decided nothing still spends its key (0010): under the log head, shared,
-- so that an `append_batch` which read the keys before this insert does not fail on the
-- same key after it. A function, because the server's role may no longer lock the head.
CREATE FUNCTION record_unchanged(p_actor text, p_key text, p_request_hash text, p_response jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM FROM log_head FOR SHARE;
    INSERT INTO idempotency_keys (actor, key, request_hash, positions, response)
    VALUES (p_actor, p_key, p_request_hash, '{}', p_response)
    ON CONFLICT (actor, key) DO NOTHING;
END
$$;

-- The server's role reads the log and appends through the two functions above, nothing
-- else: no INSERT into events around append_batch, no UPDATE of the log head or of a
-- stream's version or last hash. (UPDATE and DELETE of events were never granted, and the
-- triggers refuse them for the owner too.)
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON events, streams, log_head FROM lender_app;
GRANT SELECT ON events, streams, log_head TO lender_app;
REVOKE ALL ON FUNCTION append_batch(jsonb), record_unchanged(text, text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION append_batch(jsonb), record_unchanged(text, text, text, jsonb) TO lender_app;

-- Signed checkpoints of the log (`lender audit checkpoint`, or the server every
-- AUDIT_CHECKPOINT_EVERY): each the statement as signed, kept outside the log, so that
-- auditors can fetch them (GET /v1/audit/checkpoints) and keep copies where the operator
-- cannot reach them. A copy in this table proves nothing by itself: an auditor's own copy does.
CREATE TABLE audit_checkpoints (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    position        bigint      NOT NULL,
    signed_at       timestamptz NOT NULL,
    statement       jsonb       NOT NULL
);
CREATE INDEX audit_checkpoints_position ON audit_checkpoints (position);
GRANT SELECT, INSERT ON audit_checkpoints TO lender_app;
