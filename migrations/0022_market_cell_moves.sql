-- The market's kept cells (0021) moved once per batch of events, not once per event.
--
-- `market_cells_move` upserted seven cells for every item that arrived or left, in a
-- PL/pgSQL call: 0.16 ms an event, and a rebuild that replays thousands of items of one city
-- in a batch updated that city's coarse cells thousands of times in one transaction, each
-- update a new row version to walk past (`pg_stat_statements`: a third of a rebuild's time).
-- Now each change only notes the move here; the projection applies a batch's moves at its
-- end, set-based, one upsert per cell touched (`ItemsProjection.applyCellMoves`), and this
-- table is empty again before the transaction commits. Unqualified names: a rebuild notes
-- and applies moves in its own schema's copy.
CREATE TABLE market_cell_moves (
    item  uuid    NOT NULL,
    lat   float8  NOT NULL,
    lng   float8  NOT NULL,
    -- 1: the item became available here; -1: it stopped being, or moved away.
    delta integer NOT NULL
);
GRANT SELECT, INSERT, UPDATE, DELETE ON market_cell_moves TO lender_app;

DROP FUNCTION market_cells_move(uuid, float8, float8, integer);
