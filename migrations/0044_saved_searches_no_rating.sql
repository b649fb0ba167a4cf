-- A saved search may not ask for a rating (`not_for_saved_searches`: no new posting has one),
-- so its column was only ever null.
ALTER TABLE saved_searches DROP COLUMN min_rating;
