-- Reviews, conversations on bids, and each user's feed of what concerns them (SPEC §11.4).
-- Views like the others: written by the items and feed projections from events only.

-- Ratings: the sum of stars and the count, so the mean is exact and one update keeps it.
-- A user is rated by the reviews about them; an item by its renters' reviews.
ALTER TABLE users_view ADD COLUMN review_count integer NOT NULL DEFAULT 0,
                       ADD COLUMN review_stars integer NOT NULL DEFAULT 0;
ALTER TABLE items_view ADD COLUMN review_count integer NOT NULL DEFAULT 0,
                       ADD COLUMN review_stars integer NOT NULL DEFAULT 0;

CREATE TABLE reviews_view (
    bid_id      uuid        NOT NULL,
    role        text        NOT NULL CHECK (role IN ('owner', 'bidder')),
    item_id     uuid        NOT NULL,
    author_id   uuid        NOT NULL,
    subject_id  uuid        NOT NULL,
    stars       integer     NOT NULL,
    text        text        NOT NULL,
    created_at  timestamptz NOT NULL,
    position    bigint      NOT NULL,
    PRIMARY KEY (bid_id, role)
);
CREATE INDEX reviews_view_subject_newest ON reviews_view (subject_id, created_at DESC, bid_id DESC);
CREATE INDEX reviews_view_item_newest ON reviews_view (item_id, created_at DESC, bid_id DESC);
CREATE INDEX reviews_view_author ON reviews_view (author_id);

CREATE TABLE messages_view (
    message_id   uuid        PRIMARY KEY,
    bid_id       uuid        NOT NULL,
    item_id      uuid        NOT NULL,
    author_id    uuid        NOT NULL,
    recipient_id uuid        NOT NULL,
    text         text        NOT NULL,
    created_at   timestamptz NOT NULL,
    position     bigint      NOT NULL
);
CREATE INDEX messages_view_bid_newest ON messages_view (bid_id, position DESC);
CREATE INDEX messages_view_author ON messages_view (author_id);

-- One notice per user and log position: the event that concerned them. Ids only; a read
-- joins the titles and handles, so a change of either shows at once.
CREATE TABLE feed_view (
    user_id      uuid        NOT NULL,
    position     bigint      NOT NULL,
    kind         text        NOT NULL,
    item_id      uuid,
    bid_id       uuid,
    loan_id      uuid,
    message_id   uuid,
    from_user_id uuid,
    amount_cents bigint,
    stars        integer,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (user_id, position)
);
-- The live feed reads every user's new notices by position, for all its clients at once.
CREATE INDEX feed_view_position ON feed_view (position);

-- Who lent to each loan, for the notices of its funding and repayment: the feed's own, so
-- that it is rebuilt with the feed and needs nothing of the loans' views.
CREATE TABLE feed_loan_lenders (
    loan_id   uuid NOT NULL,
    lender_id uuid NOT NULL,
    PRIMARY KEY (loan_id, lender_id)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON reviews_view, messages_view, feed_view, feed_loan_lenders TO lender_app;
