-- The generated columns computed by PL/pgSQL copies of earth_point, mercator_x and
-- mercator_y. PostgreSQL 15 prepares a table's generated expressions at the start of every
-- INSERT, and of every UPDATE that sets one of their inputs (lat, lng), prepared statements
-- included: a SQL function there is inlined, its body parsed and analysed each time, three
-- bodies for every item posted, revised or sent to 0,0 by a forgetting: 13% of PostgreSQL's
-- time in a rebuild (perf: ExecInitStoredGenerated). Written out in full instead, the
-- expressions' stored node trees cost more to read back than the parsing did. A PL/pgSQL
-- function is compiled once a session and called: the same formulas, so every stored value
-- stays as it was. The SQL functions stay for the queries, which plan them once. `cube` is
-- qualified, so that a restore's empty search_path finds it.
CREATE FUNCTION stored_earth_point(lat float8, lng float8) RETURNS cube
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN public.cube(public.cube(public.cube(6371.0088::float8 * cos(radians(lat)) * cos(radians(lng))),
                                   6371.0088::float8 * cos(radians(lat)) * sin(radians(lng))),
                       6371.0088::float8 * sin(radians(lat)));
END
$$;

CREATE FUNCTION stored_mercator_x(lng float8) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN least(16777215, greatest(0, floor((lng + 180) / 360 * 16777216)))::integer;
END
$$;

CREATE FUNCTION stored_mercator_y(lat float8) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN least(16777215, greatest(0, floor(
        (1 - ln(tan(radians(greatest(-85.05112878, least(85.05112878, lat))))
                + 1 / cos(radians(greatest(-85.05112878, least(85.05112878, lat))))) / pi()) / 2 * 16777216)))::integer;
END
$$;

-- PostgreSQL 15 cannot change a generated expression in place: each column is made again,
-- and the indexes on it with it.
ALTER TABLE items_view DROP COLUMN earth, DROP COLUMN map_x, DROP COLUMN map_y;
ALTER TABLE items_view
    ADD COLUMN earth cube GENERATED ALWAYS AS (stored_earth_point(lat, lng)) STORED,
    ADD COLUMN map_x integer GENERATED ALWAYS AS (stored_mercator_x(lng)) STORED,
    ADD COLUMN map_y integer GENERATED ALWAYS AS (stored_mercator_y(lat)) STORED;
CREATE INDEX items_view_market_earth ON items_view USING gist (earth) WHERE status = 'available';
CREATE INDEX items_view_market_cells ON items_view (map_x, map_y) INCLUDE (lat, lng, item_id)
    WHERE status = 'available';
CREATE INDEX items_view_market_rows ON items_view (map_y, map_x) INCLUDE (lat, lng, item_id)
    WHERE status = 'available';

ALTER TABLE loans_view DROP COLUMN earth;
ALTER TABLE loans_view ADD COLUMN earth cube GENERATED ALWAYS AS (stored_earth_point(lat, lng)) STORED;
CREATE INDEX loans_view_earth ON loans_view USING gist (earth);
