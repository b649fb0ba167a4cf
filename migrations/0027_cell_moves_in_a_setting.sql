-- The market's cell moves are no longer noted in `market_cell_moves` (0022) but in a setting
-- of each batch's transaction, `lender.cell_moves` (`ItemsProjection.startMoves`). Emptied by
-- DELETE, the table kept its dead rows until autovacuum came, at most once a minute and never
-- past an older snapshot, and every batch read past them all: 530 µs a batch after 10 s of
-- postings, 1.6 ms after 60 s. The table stays, empty, for the servers of the release before
-- while they are replaced; a later migration drops it.
COMMENT ON TABLE market_cell_moves IS 'Unused since migration 0027 (the moves are in the setting lender.cell_moves); to be dropped.';
