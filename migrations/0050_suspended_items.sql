-- The jobs' sweep finds postings left suspended whose owner no longer is (SPEC §12.5): few
-- rows, found without reading the items.
CREATE INDEX items_view_suspended ON items_view (owner_id) WHERE status = 'suspended';
