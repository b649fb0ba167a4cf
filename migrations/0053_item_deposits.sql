-- A rental's security deposit (SPEC §12.5), shown with the rental so that a renter knows it
-- before bidding; null for requests and for rentals posted before deposits.
ALTER TABLE items_view ADD COLUMN security_deposit_cents integer;
