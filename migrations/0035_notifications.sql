-- Notices outside the app (SPEC §12.4): settings per kind and channel, devices, push through
-- a port whose sandbox records what it would send, and the fan-out of the feed into the outbox.

-- What a user changed from the defaults (the defaults are the server's: `NotificationSettings`).
CREATE TABLE notification_settings (
    user_id  uuid    NOT NULL,
    kind     text    NOT NULL,   -- a notice kind of feed_view
    email    boolean NOT NULL,
    push     boolean NOT NULL,
    PRIMARY KEY (user_id, kind)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON notification_settings TO lender_app;

-- The phones a user's pushes go to. A token is one device's: registered again by another
-- user (the phone changed hands, or accounts), it is theirs from then on.
CREATE TABLE devices (
    token       text        PRIMARY KEY,
    user_id     uuid        NOT NULL,
    platform    text        NOT NULL CHECK (platform IN ('ios', 'android')),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX devices_user ON devices (user_id, created_at);
GRANT SELECT, INSERT, UPDATE, DELETE ON devices TO lender_app;

-- The outbox carries pushes as well as mail: one order per recipient (an address, or a
-- device's token), one claim, one retry schedule.
ALTER TABLE outbox
    ADD COLUMN channel text NOT NULL DEFAULT 'email' CHECK (channel IN ('email', 'push')),
    ADD COLUMN platform text,
    ADD COLUMN unsubscribe_url text;

-- What the push sandbox would have sent: a payload of a title and ids, never personal data.
CREATE TABLE push_sandbox (
    id          bigserial   PRIMARY KEY,
    outbox_id   bigint      NOT NULL,
    platform    text        NOT NULL,
    token       text        NOT NULL,
    payload     jsonb       NOT NULL,
    sent_at     timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, DELETE ON push_sandbox TO lender_app;
GRANT USAGE ON SEQUENCE push_sandbox_id_seq TO lender_app;

-- How far the feed has been fanned out into the outbox: each notice once, in the transaction
-- that writes its mail and pushes. It starts at today's feed: older notices are not sent.
CREATE TABLE notifier_position (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    position  bigint  NOT NULL
);
INSERT INTO notifier_position (position) SELECT coalesce(max(position), 0) FROM feed_view;
GRANT SELECT, UPDATE ON notifier_position TO lender_app;

-- A booking's reminder the day before it starts, once (`BookingReminded`).
ALTER TABLE bookings_view ADD COLUMN reminded boolean NOT NULL DEFAULT false;
CREATE INDEX bookings_view_reminders_due ON bookings_view (from_day) WHERE status = 'confirmed' AND NOT reminded;
