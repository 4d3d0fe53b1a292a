-- The delivery floor's tables: the events, one endpoint per burst, a delivery per (event, endpoint)
-- and the attempts, each with the columns a delivery reads or writes.
CREATE TABLE events (id TEXT PRIMARY KEY, type TEXT NOT NULL, payload TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE endpoints (id TEXT PRIMARY KEY, url TEXT NOT NULL, secret TEXT NOT NULL);
CREATE TABLE deliveries (id TEXT PRIMARY KEY, event_id TEXT NOT NULL REFERENCES events (id), endpoint_id TEXT NOT NULL REFERENCES endpoints (id), status TEXT NOT NULL, attempt_count INTEGER NOT NULL DEFAULT 0, last_status_code INTEGER, updated_at INTEGER NOT NULL, UNIQUE (event_id, endpoint_id));
CREATE TABLE attempts (id TEXT PRIMARY KEY, delivery_id TEXT NOT NULL REFERENCES deliveries (id), attempt_number INTEGER NOT NULL, status_code INTEGER, duration_ms INTEGER NOT NULL, response_excerpt TEXT, error TEXT, attempted_at TEXT NOT NULL, UNIQUE (delivery_id, attempt_number));
