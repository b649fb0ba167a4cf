-- Saved searches (SPEC §12.7): a market query a user keeps, and a `new_match` notice when a
-- new posting matches it. Settings of a person, as the notification settings are (0035), not
-- facts of the marketplace: kept outside the log. What they caused is in it: a posting's
-- matches are found when the posting is decided and recorded with it (`SavedSearchesMatched`),
-- so the feed is a projection of the log like every other, and a replay makes the same one.
CREATE TABLE saved_searches (
    search_id    uuid        PRIMARY KEY,
    user_id      uuid        NOT NULL,
    name         text        NOT NULL,
    -- The market's query string, as the user gave it (answered back as it was).
    query        text        NOT NULL,
    -- What a new posting is matched against, read from `query` once, when it was saved.
    words        tsquery,
    kind         text,
    category     text,
    min_price    integer,
    max_price    integer,
    country      text,
    near_earth   cube,
    radius_chord float8,
    min_lng      float8,
    min_lat      float8,
    max_lng      float8,
    max_lat      float8,
    min_rating   float8,
    from_day     date,
    until_day    date,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX saved_searches_user ON saved_searches (user_id, created_at, search_id);
-- Searches with no words, met by every posting: their other filters decide.
CREATE INDEX saved_searches_wordless ON saved_searches (category) WHERE words IS NULL;

-- Each search with words under the first three letters of each spelling of its longest word
-- (a typo's corrections too): a posting meets only the searches keyed by the beginnings of
-- its own words, then each is checked in full. So a posting reads a handful of the searches,
-- not all of them.
CREATE TABLE saved_search_keys (
    key       text COLLATE "C" NOT NULL,
    search_id uuid NOT NULL REFERENCES saved_searches ON DELETE CASCADE,
    PRIMARY KEY (key, search_id)
);
CREATE INDEX saved_search_keys_search ON saved_search_keys (search_id);

GRANT SELECT, INSERT, DELETE ON saved_searches, saved_search_keys TO lender_app;
