CREATE TABLE `webhook_recoveries` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`endpoint_id` text NOT NULL,
	`since` text NOT NULL,
	`until` text NOT NULL,
	`status` text NOT NULL,
	`total` integer DEFAULT 0 NOT NULL,
	`sent` integer DEFAULT 0 NOT NULL,
	`cursor` integer DEFAULT 0 NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` integer NOT NULL,
	`completed_at` text
);
--> statement-breakpoint
CREATE INDEX `webhook_recoveries_endpoint` ON `webhook_recoveries` (`endpoint_id`,`status`);--> statement-breakpoint
CREATE INDEX `webhook_recoveries_account` ON `webhook_recoveries` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `webhook_recoveries_running` ON `webhook_recoveries` (`status`,`updated_at`);