ALTER TABLE `accounts` ADD `event_retention_days` integer DEFAULT 30 NOT NULL;--> statement-breakpoint
CREATE INDEX `events_account_created` ON `events` (`account_id`,`created_at`);