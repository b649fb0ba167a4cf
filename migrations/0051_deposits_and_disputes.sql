-- Security deposits, claims and disputes on bookings (SPEC §12.5), as the items' streams tell
-- them. `deposit_status`: `held` from the booking's confirmation, then `released` to the
-- renter when its window closed, or `divided` by an operator's resolution.
ALTER TABLE bookings_view
    ADD COLUMN deposit_cents        integer,
    ADD COLUMN deposit_status       text CHECK (deposit_status IN ('held', 'released', 'divided')),
    ADD COLUMN claim_cents          integer,
    ADD COLUMN claim_text           text,
    ADD COLUMN dispute_reason       text,
    ADD COLUMN dispute_text         text,
    ADD COLUMN dispute_opened_by    uuid,
    ADD COLUMN dispute_status       text CHECK (dispute_status IN ('open', 'resolved')),
    ADD COLUMN resolution_renter_cents integer,
    ADD COLUMN resolution_owner_cents  integer,
    ADD COLUMN resolved_by          uuid,
    ADD COLUMN resolution           text;
-- The jobs' deposits to give back: held, unclaimed, undisputed, past the window.
CREATE INDEX bookings_view_deposits_due ON bookings_view (until_day)
    WHERE status = 'completed' AND deposit_status = 'held' AND claim_cents IS NULL AND dispute_status IS NULL;
-- The desk's disputes and claims waiting for an operator.
CREATE INDEX bookings_view_awaiting ON bookings_view (created_at)
    WHERE dispute_status = 'open' OR (claim_cents IS NOT NULL AND deposit_status = 'held');
