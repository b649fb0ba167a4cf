-- Rentals posted with a deposit between migrations 0051 and 0053 show it too: the column
-- 0053 added is read back from their postings, as a rebuild would write it.
UPDATE items_view i SET security_deposit_cents = (e.data->>'securityDepositCents')::int
FROM events e
WHERE e.type = 'RentalPosted' AND e.data ? 'securityDepositCents' AND e.stream_id = 'item-' || i.item_id
  AND i.security_deposit_cents IS NULL;
