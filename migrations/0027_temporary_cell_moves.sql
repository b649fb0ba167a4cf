-- The market's cell moves are noted in a temporary table of each session, emptied at each
-- commit (`ItemsProjection.scratchCellMoves`): the shared `market_cell_moves` (0022), emptied
-- by DELETE, made every batch read past the dead moves of the last minute. The server's role
-- needs the right to make temporary tables, which every role has from PUBLIC unless an
-- operator took it away; then it is granted here, so that a migration says so at once
-- rather than every posting failing.
DO $$
BEGIN
    IF NOT has_database_privilege('lender_app', current_database(), 'TEMPORARY') THEN
        EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO lender_app', current_database());
    END IF;
END
$$;
