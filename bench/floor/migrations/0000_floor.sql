-- The bare Worker's tables: a row read by id, and the three rows a keyed write commits (the object,
-- its idempotency record, its outbox event), as POST /payout's one batch does.
CREATE TABLE items (id TEXT PRIMARY KEY, account_id TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE records (account_id TEXT NOT NULL, key TEXT NOT NULL, response TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (account_id, key));
CREATE TABLE events (id TEXT PRIMARY KEY, account_id TEXT NOT NULL, type TEXT NOT NULL, payload TEXT NOT NULL, created_at TEXT NOT NULL);
