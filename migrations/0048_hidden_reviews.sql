-- An operator hides a review (SPEC §12.5): out of every list and rating (ReviewHidden).
ALTER TABLE reviews_view ADD COLUMN hidden boolean NOT NULL DEFAULT false;
