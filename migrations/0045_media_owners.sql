-- Issue 48: each stored image counts against its uploader's storage quota (PhotoLibrary).
-- The owner is whoever stored the digest first (an image stored again by another user is not
-- stored twice, nor counted twice); images from before this migration belong to nobody.
ALTER TABLE media ADD COLUMN owner_id uuid;
ALTER TABLE media ADD COLUMN size integer GENERATED ALWAYS AS (octet_length(bytes)) STORED;
CREATE INDEX media_owner ON media (owner_id) WHERE owner_id IS NOT NULL;
