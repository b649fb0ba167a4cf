-- Rentals booked by date (SPEC §12.1): each confirmed booking of a rental, and the days an
-- owner closed on it. Handles and titles are joined when read, so a forgotten person's name
-- is never copied here.
CREATE TABLE bookings_view (
    booking_id          uuid        PRIMARY KEY,   -- the approved bid's id
    item_id             uuid        NOT NULL,
    owner_id            uuid        NOT NULL,
    renter_id           uuid        NOT NULL,
    from_day            date        NOT NULL,
    until_day           date        NOT NULL,
    daily_price_cents   integer     NOT NULL,
    status              text        NOT NULL,      -- confirmed, completed, cancelled
    created_at          timestamptz NOT NULL,
    completed_at        timestamptz,
    cancelled_at        timestamptz,
    cancelled_by        uuid,
    completed_on        date,                      -- the day it was completed on: reviews for 14 days
    reviews_closed      boolean     NOT NULL DEFAULT false,
    position            bigint      NOT NULL
);
-- An item's calendar, and each party's list (upcoming by from, past by until).
CREATE INDEX bookings_view_item ON bookings_view (item_id, from_day);
CREATE INDEX bookings_view_owner ON bookings_view (owner_id, from_day, booking_id);
CREATE INDEX bookings_view_renter ON bookings_view (renter_id, from_day, booking_id);

CREATE TABLE blackouts_view (
    blackout_id         uuid        PRIMARY KEY,
    item_id             uuid        NOT NULL,
    from_day            date        NOT NULL,
    until_day           date        NOT NULL,
    created_at          timestamptz NOT NULL
);
CREATE INDEX blackouts_view_item ON blackouts_view (item_id, from_day);

GRANT SELECT, INSERT, UPDATE, DELETE ON bookings_view, blackouts_view TO lender_app;

-- A database of the second release, read as the third reads its log: a rental's reservation
-- (`ItemReserved`) is a booking over the approved bid's days, its next `ItemClosed` that
-- booking's completion, and the rental itself stays available. Times and positions are the
-- events' own, as a rebuild writes them; `lender replay --verify` holds these rows to one.
INSERT INTO bookings_view (booking_id, item_id, owner_id, renter_id, from_day, until_day, daily_price_cents, status,
                           created_at, completed_at, reviews_closed, position)
SELECT b.bid_id, b.item_id, i.owner_id, b.bidder_id, b.from_day, b.until_day, b.daily_price_cents,
       CASE WHEN closed.position IS NULL THEN 'confirmed' ELSE 'completed' END,
       r.recorded_at, closed.recorded_at, closed.position IS NOT NULL, coalesce(closed.position, r.position)
FROM events r
JOIN bids_view b ON b.bid_id = (r.data ->> 'bidID')::uuid
JOIN items_view i ON i.item_id = b.item_id AND i.kind = 'rental'
LEFT JOIN LATERAL (
    SELECT c.position, c.recorded_at FROM events c
    WHERE c.stream_id = r.stream_id AND c.type = 'ItemClosed' AND c.stream_version > r.stream_version
    ORDER BY c.stream_version LIMIT 1
) closed ON true
WHERE r.type = 'ItemReserved'
ON CONFLICT (booking_id) DO NOTHING;
UPDATE items_view SET status = 'available' WHERE kind = 'rental' AND status IN ('reserved', 'closed');

-- What the jobs look for (`DueWork`): pending bids by first day and age, postings by the end of
-- their window, confirmed bookings by their last day.
CREATE INDEX bids_view_pending ON bids_view (from_day, created_at) WHERE status = 'pending';
CREATE INDEX items_view_window_end ON items_view (window_until) WHERE status = 'available';
CREATE INDEX bookings_view_due ON bookings_view (until_day) WHERE status = 'confirmed';
CREATE INDEX bookings_view_reviews_due ON bookings_view (completed_on) WHERE status = 'completed' AND NOT reviews_closed;

-- A booking's reviews are held until both parties have written theirs or its window closed.
ALTER TABLE reviews_view ADD COLUMN published boolean NOT NULL DEFAULT true;

-- The rentals put back in the market above count in its kept cells again: made anew from the
-- available items, as a rebuild makes them at its end (`ItemsProjection.finishRebuild`).
TRUNCATE market_cells;
INSERT INTO market_cells (level, cell_x, cell_y, count, sum_lat, sum_lng, sample)
SELECT l, mercator_x(i.lng) >> (24 - l), mercator_y(i.lat) >> (24 - l), count(*),
       sum(round(i.lat * 1e7)::bigint), sum(round(i.lng * 1e7)::bigint), (array_agg(i.item_id ORDER BY i.item_id))[1]
FROM items_view i, unnest('{4,6,8,10,12,14,16}'::smallint[]) AS l
WHERE i.status = 'available'
GROUP BY 1, 2, 3;
