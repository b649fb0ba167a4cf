-- `q` on the market and the loans: every word in the title, case-insensitively, anywhere in
-- it (ILIKE '%word%'). A trigram index answers that without reading every title (issue 17).
-- pg_trgm ships with PostgreSQL and is a trusted extension: the database's owner may add it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE INDEX items_view_title_trgm ON items_view USING gin (title gin_trgm_ops) WHERE status = 'available';
CREATE INDEX loans_view_title_trgm ON loans_view USING gin (title gin_trgm_ops);
