-- Metered usage (issue 21): a plan's usage_type and aggregate_usage; a metered subscription's usage records;
-- a metered period's aggregated usage.
CREATE TABLE `usage_records` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`subscription_id` text NOT NULL,
	`period_index` integer NOT NULL,
	`quantity` integer NOT NULL,
	`action` text NOT NULL,
	`timestamp` text NOT NULL,
	`created_at` text NOT NULL,
	CONSTRAINT "usage_records_quantity" CHECK("usage_records"."quantity" >= 0)
);
--> statement-breakpoint
CREATE INDEX `usage_records_period` ON `usage_records` (`subscription_id`,`period_index`,`id`);--> statement-breakpoint
ALTER TABLE `plans` ADD `usage_type` text DEFAULT 'licensed' NOT NULL;--> statement-breakpoint
ALTER TABLE `plans` ADD `aggregate_usage` text;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `usage_quantity` integer;