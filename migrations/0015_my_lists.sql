-- GET /v1/me and its lists (/v1/me/posts, /bids, /bids/received, /loans) read the newest
-- page of what a user has, on an index that starts with the user: the cost of a page no
-- longer grows with the user's history (issue 17).

-- The bids on a user's items, without visiting each item: the owner is kept on the bid.
-- Written by the items projection from items_view (same transaction); filled here for the
-- bids already projected. Left nullable: a view is rebuilt from the log, never trusted.
ALTER TABLE bids_view ADD COLUMN owner_id uuid;
UPDATE bids_view b SET owner_id = i.owner_id FROM items_view i WHERE i.item_id = b.item_id;

CREATE INDEX bids_view_owner_newest ON bids_view (owner_id, created_at DESC, bid_id DESC);
CREATE INDEX bids_view_bidder_newest ON bids_view (bidder_id, created_at DESC, bid_id DESC);
DROP INDEX bids_view_bidder;
CREATE INDEX items_view_owner_newest ON items_view (owner_id, created_at DESC, item_id DESC);
DROP INDEX items_view_owner;
CREATE INDEX loan_shares_view_lender_newest ON loan_shares_view (lender_id, first_bought_at DESC, loan_id DESC);
DROP INDEX loan_shares_view_lender;
