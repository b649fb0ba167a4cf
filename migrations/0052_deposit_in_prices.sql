-- A rental bid's security deposit (SPEC §12.5), shown with its prices: what the bid holds
-- beyond the charge, and its booking captures.
ALTER TABLE rental_prices_view ADD COLUMN deposit_cents integer;
