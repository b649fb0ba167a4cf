-- A zoomed-out map asks for counts per grid cell rather than 100k pins (SPEC §11.4). Each
-- item's place as Web Mercator pixel coordinates at zoom 16 of 256-px tiles (2^24 across):
-- a cell at any coarser grid is a right shift of both, so one stored pair serves every zoom.
-- Latitudes beyond ±85.0511° (the projection's edge) are drawn at the edge, as maps do.
CREATE FUNCTION mercator_x(lng float8) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT least(16777215, greatest(0, floor((lng + 180) / 360 * 16777216)))::integer
$$;

CREATE FUNCTION mercator_y(lat float8) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT least(16777215, greatest(0, floor(
        (1 - ln(tan(radians(greatest(-85.05112878, least(85.05112878, lat))))
                + 1 / cos(radians(greatest(-85.05112878, least(85.05112878, lat))))) / pi()) / 2 * 16777216)))::integer
$$;

ALTER TABLE items_view
    ADD COLUMN map_x integer GENERATED ALWAYS AS (mercator_x(lng)) STORED,
    ADD COLUMN map_y integer GENERATED ALWAYS AS (mercator_y(lat)) STORED;

-- Covering: a count per cell reads the index alone once the table is vacuumed.
CREATE INDEX items_view_market_cells ON items_view (map_x, map_y) INCLUDE (lat, lng, item_id)
    WHERE status = 'available';
