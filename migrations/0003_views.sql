-- Views (projections), written from events only, in the transaction that appends them.
-- None holds a fact the log does not; all can be rebuilt from it.

-- Distances on the earth, for the market's `near`: points as 3-D cubes with a GiST index,
-- the model of the earthdistance module. earthdistance is not a trusted extension (only a
-- superuser may create it) and migrations run as the owner, so its few functions are
-- written out here over cube, which is trusted.
CREATE EXTENSION IF NOT EXISTS cube;

CREATE FUNCTION earth_radius_km() RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 6371.0088::float8';

CREATE FUNCTION earth_point(lat float8, lng float8) RETURNS cube
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT cube(cube(cube(earth_radius_km() * cos(radians(lat)) * cos(radians(lng))),
                     earth_radius_km() * cos(radians(lat)) * sin(radians(lng))),
                earth_radius_km() * sin(radians(lat)))
$$;

-- Great-circle kilometres between two earth points, from their chord.
CREATE FUNCTION earth_km(a cube, b cube) RETURNS float8
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT 2 * earth_radius_km() * asin(least(1.0, cube_distance(a, b) / (2 * earth_radius_km())))
$$;

CREATE TABLE users_view (
    user_id             uuid        PRIMARY KEY,
    handle              text        NOT NULL UNIQUE,
    display_name        text        NOT NULL,
    email               text        NOT NULL,
    country             text,
    default_share_cents integer,
    -- Items closed with this user as owner or approved bidder.
    completed_deals     integer     NOT NULL DEFAULT 0,
    member_since        timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);

CREATE TABLE items_view (
    item_id             uuid        PRIMARY KEY,
    kind                text        NOT NULL CHECK (kind IN ('rental', 'request')),
    owner_id            uuid        NOT NULL,
    owner_handle        text        NOT NULL,
    title               text        NOT NULL,
    description         text        NOT NULL,
    category            text        NOT NULL,
    -- The daily price of a rental; the maximum daily price of a request, if any.
    price_cents         integer,
    lat                 double precision NOT NULL,
    lng                 double precision NOT NULL,
    earth               cube        GENERATED ALWAYS AS (earth_point(lat, lng)) STORED,
    place               text        NOT NULL,
    window_from         date,
    window_until        date,
    status              text        NOT NULL,
    bid_count           integer     NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    -- The log position of the last event applied: keyset paging and `updatedSince`.
    position            bigint      NOT NULL
);
CREATE INDEX items_view_owner ON items_view (owner_id);
-- The market: available items, newest first (created_at never changes, so keyset pages
-- stay stable while items are updated), and near a point.
CREATE INDEX items_view_market ON items_view (created_at DESC, item_id DESC) WHERE status = 'available';
CREATE INDEX items_view_market_earth ON items_view USING gist (earth) WHERE status = 'available';

CREATE TABLE bids_view (
    bid_id              uuid        PRIMARY KEY,
    item_id             uuid        NOT NULL,
    bidder_id           uuid        NOT NULL,
    bidder_handle       text        NOT NULL,
    daily_price_cents   integer     NOT NULL,
    from_day            date        NOT NULL,
    until_day           date        NOT NULL,
    message             text,
    status              text        NOT NULL,
    reason              text,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);
CREATE INDEX bids_view_item ON bids_view (item_id, created_at);
CREATE INDEX bids_view_bidder ON bids_view (bidder_id);

GRANT SELECT, INSERT, UPDATE, DELETE ON users_view, items_view, bids_view TO lender_app;
