-- The jobs' sweep finds loans left suspended whose borrower no longer is (SPEC §12.5).
CREATE INDEX loans_view_suspended ON loans_view (borrower_id) WHERE status = 'suspended';
