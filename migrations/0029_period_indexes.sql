-- The market's period filter (`availableFrom`, `availableUntil`) asks which bookings and
-- blackouts overlap the period: on their days as ranges, so that neither the past ones,
-- which pile up for good, nor those far ahead are read. 100,000 rentals, 30,000 bookings:
-- 3.9 ms a page by a scan of every booking, 2.2 ms by this index (`EXPLAIN ANALYZE`).
CREATE INDEX bookings_view_days ON bookings_view USING gist (daterange(from_day, until_day, '[]')) WHERE status <> 'cancelled';
CREATE INDEX blackouts_view_days ON blackouts_view USING gist (daterange(from_day, until_day, '[]'));
