-- Each sender's claim names its round, so that a row is sent only while that claim holds:
-- a batch whose later rows wait behind slow SMTP renews each row's claim before sending it,
-- and skips one whose claim lapsed (another server may have it now).
ALTER TABLE outbox ADD COLUMN claimed_by uuid;
