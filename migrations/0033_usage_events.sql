ALTER TABLE `usage_records` ADD `event_id` text;--> statement-breakpoint
CREATE UNIQUE INDEX `usage_records_event` ON `usage_records` (`account_id`,`livemode`,`event_id`);--> statement-breakpoint
CREATE INDEX `usage_records_event_age` ON `usage_records` (`created_at`) WHERE event_id IS NOT NULL;