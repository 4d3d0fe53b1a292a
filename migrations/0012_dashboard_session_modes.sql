-- The dashboard's mode switch (issue 20 §1). A session holds at most one API key per mode, both of
-- its own account: the key it was signed in with, and the other mode's key added from the switch.
-- `livemode` says which one acts; the acting mode's key must be there (the CHECK). Sessions open
-- when this runs keep going, in the mode of the key they were opened with. The table is rebuilt:
-- `key_id` becomes `test_key_id` or `live_key_id`, and SQLite cannot add a table CHECK in place.
CREATE TABLE `__new_dashboard_sessions` (
	`token_hash` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`test_key_id` text,
	`live_key_id` text,
	`livemode` integer NOT NULL,
	`created_at` text NOT NULL,
	`expires_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`test_key_id`) REFERENCES `api_keys`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`live_key_id`) REFERENCES `api_keys`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "dashboard_sessions_acting_key" CHECK(CASE WHEN "livemode" THEN "live_key_id" IS NOT NULL ELSE "test_key_id" IS NOT NULL END)
);
--> statement-breakpoint
INSERT INTO `__new_dashboard_sessions` (`token_hash`, `account_id`, `test_key_id`, `live_key_id`, `livemode`, `created_at`, `expires_at`)
  SELECT s.`token_hash`, s.`account_id`,
    CASE WHEN k.`mode` = 'test' THEN s.`key_id` END,
    CASE WHEN k.`mode` = 'live' THEN s.`key_id` END,
    k.`mode` = 'live', s.`created_at`, s.`expires_at`
  FROM `dashboard_sessions` AS s INNER JOIN `api_keys` AS k ON k.`id` = s.`key_id`;--> statement-breakpoint
DROP TABLE `dashboard_sessions`;--> statement-breakpoint
ALTER TABLE `__new_dashboard_sessions` RENAME TO `dashboard_sessions`;--> statement-breakpoint
CREATE INDEX `dashboard_sessions_test_key` ON `dashboard_sessions` (`test_key_id`);--> statement-breakpoint
CREATE INDEX `dashboard_sessions_live_key` ON `dashboard_sessions` (`live_key_id`);--> statement-breakpoint
CREATE INDEX `dashboard_sessions_expiry` ON `dashboard_sessions` (`expires_at`);
