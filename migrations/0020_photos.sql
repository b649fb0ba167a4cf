-- Photos (SPEC §11.4). The images are not events: `media` holds each stored image once, by
-- the SHA-256 of its full-size bytes, with its thumbnails; the log says which digest belongs
-- to which item, loan or profile, and the views list them. An image no view references any
-- more is deleted by `lender media gc`.
CREATE TABLE media (
    digest      text        NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    -- The full image or a thumbnail by its long side.
    variant     text        NOT NULL CHECK (variant IN ('full', '800', '200')),
    bytes       bytea       NOT NULL,
    width       integer     NOT NULL,
    height      integer     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (digest, variant)
);
-- JPEG does not compress: store it out of line without trying.
ALTER TABLE media ALTER COLUMN bytes SET STORAGE EXTERNAL;
-- The server deletes a forgotten person's profile photo at once (SPEC §11.3).
GRANT SELECT, INSERT, DELETE ON media TO lender_app;

ALTER TABLE items_view ADD COLUMN photos text[] NOT NULL DEFAULT '{}';
ALTER TABLE loans_view ADD COLUMN photos text[] NOT NULL DEFAULT '{}';
ALTER TABLE users_view ADD COLUMN photo text;
