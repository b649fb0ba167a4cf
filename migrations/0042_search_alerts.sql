-- Saved searches are told of new postings by a follower of the log (`SearchAlerts`), not on
-- the posting's own path: found there, a posting's matches cost it a second statement and 44%
-- of the postings a second (interleaved runs, 4,389/s against 2,470/s). The follower reads
-- the postings after its position, finds their searches in one statement a batch, appends
-- each item's `SavedSearchesMatched` (the item's decider tells them once), then moves the
-- position. Several servers take turns (the row's lock).
CREATE TABLE saved_search_position (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    position bigint  NOT NULL
);
INSERT INTO saved_search_position (position) SELECT coalesce(max(position), 0) FROM events;
GRANT SELECT, UPDATE ON saved_search_position TO lender_app;
