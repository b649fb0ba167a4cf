-- A success took back every settled failure of its pair, those settled while it was being
-- checked too: a burst of 49 guesses with the right password among them got five guesses
-- checked, the success, then five more (CI, 2026-11-29). Now a failure notes when it was
-- settled, and a success takes back only those settled before its own attempt began: the
-- guesses racing beside the owner's login stay counted.
ALTER TABLE login_failures ADD COLUMN settled_at timestamptz;
GRANT UPDATE (settled_at) ON login_failures TO lender_app;
