-- The bidder of an item's current deal, set when it is reserved (ItemReserved names the bid
-- and its bidder), so that closing it credits that bidder's completed deals exactly. Before,
-- the close looked among the item's approved bids, and a rental relisted and rented again
-- has the earlier renters' approved too: the latest by time is right but for a tie, which a
-- clock stepped back allows.
ALTER TABLE items_view ADD COLUMN deal_bidder_id uuid;

-- What the views already hold: the last approved bid of each item reserved or closed.
UPDATE items_view i SET deal_bidder_id = (
    SELECT b.bidder_id FROM bids_view b
    WHERE b.item_id = i.item_id AND b.status = 'approved'
    ORDER BY b.updated_at DESC LIMIT 1)
WHERE i.status IN ('reserved', 'closed');
