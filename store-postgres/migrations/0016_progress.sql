-- Progress: the last progress a holder reported with an accepted renewal
-- (renew_progress.sql), as Progress::encode writes it. Nullable with no default, so
-- adding it rewrites no row.
ALTER TABLE __SCHEMA__.items ADD COLUMN IF NOT EXISTS progress text;
