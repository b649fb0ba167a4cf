-- Clusters of a zoomed-out market without reading every item (issue 19: p50 ≤ 20 ms at
-- 100,000 items). Counting 100,000 items per request took 31 to 40 ms however indexed
-- (measured with psql, one client); so the count, the sum of latitudes and longitudes
-- and one sample item of every grid cell that holds an available item are kept here, at
-- every other grid level from 4 to 16 (2^level cells across the world). A map's grid is
-- read from the same level or the next finer one: at most four kept cells per cell shown,
-- however many items they hold. Finer grids (zoomed in, few items) count the items.
--
-- A rebuild from the log must make the same rows, whatever order the items came in: sums
-- are whole ten-millionths of a degree (no rounding drift), and the sample is the cell's
-- least item id.
CREATE TABLE market_cells (
    level    smallint NOT NULL,
    cell_x   integer  NOT NULL,
    cell_y   integer  NOT NULL,
    count    integer  NOT NULL,
    -- In units of 1e-7 degrees.
    sum_lat  bigint   NOT NULL,
    sum_lng  bigint   NOT NULL,
    sample   uuid     NOT NULL,
    PRIMARY KEY (level, cell_x, cell_y)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON market_cells TO lender_app;

-- An available item arrives in (delta 1) or leaves (delta -1) the cells around lat, lng, at
-- every kept level. Unqualified names: a rebuild runs it on its own schema's tables.
CREATE FUNCTION market_cells_move(item uuid, lat float8, lng float8, delta integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    x integer := mercator_x(lng);
    y integer := mercator_y(lat);
    lat7 bigint := round(lat * 1e7);
    lng7 bigint := round(lng * 1e7);
BEGIN
    IF delta > 0 THEN
        INSERT INTO market_cells (level, cell_x, cell_y, count, sum_lat, sum_lng, sample)
        SELECT l, x >> (24 - l), y >> (24 - l), 1, lat7, lng7, item
        FROM unnest('{4,6,8,10,12,14,16}'::smallint[]) AS l
        ON CONFLICT (level, cell_x, cell_y) DO UPDATE
            SET count = market_cells.count + 1, sum_lat = market_cells.sum_lat + excluded.sum_lat,
                sum_lng = market_cells.sum_lng + excluded.sum_lng, sample = least(market_cells.sample, excluded.sample);
    ELSE
        DELETE FROM market_cells c
        WHERE c.level = ANY ('{4,6,8,10,12,14,16}'::smallint[])
          AND c.cell_x = x >> (24 - c.level) AND c.cell_y = y >> (24 - c.level) AND c.count <= 1;
        UPDATE market_cells c
        SET count = c.count - 1, sum_lat = c.sum_lat - lat7, sum_lng = c.sum_lng - lng7,
            -- The sample leaves with its item: the least id of the cell's other available items.
            -- (It is the least, so it leaves with one removal in `count`: cheap on average.)
            sample = CASE WHEN c.sample <> item THEN c.sample ELSE coalesce((
                SELECT i.item_id FROM items_view i
                WHERE i.status = 'available' AND i.item_id <> item
                  AND i.map_x BETWEEN c.cell_x << (24 - c.level) AND ((c.cell_x + 1) << (24 - c.level)) - 1
                  AND i.map_y BETWEEN c.cell_y << (24 - c.level) AND ((c.cell_y + 1) << (24 - c.level)) - 1
                ORDER BY i.item_id LIMIT 1), c.sample) END
        WHERE c.level = ANY ('{4,6,8,10,12,14,16}'::smallint[])
          AND c.cell_x = x >> (24 - c.level) AND c.cell_y = y >> (24 - c.level);
    END IF;
END
$$;

-- The items already available.
SELECT market_cells_move(item_id, lat, lng, 1) FROM items_view WHERE status = 'available';

-- The rows of cells along a box's northern and southern edges, which the kept cells cannot
-- answer exactly: by latitude first, as (map_x, map_y) serves the columns along its sides.
CREATE INDEX items_view_market_rows ON items_view (map_y, map_x) INCLUDE (lat, lng, item_id)
    WHERE status = 'available';

-- An image uploaded again is young again (`created_at`), so that `lender media gc` spares it
-- until the event that names it is in the log.
GRANT UPDATE (created_at) ON media TO lender_app;
