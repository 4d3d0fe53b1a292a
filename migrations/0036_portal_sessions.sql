CREATE TABLE `portal_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`key_id` text NOT NULL,
	`page_secret` text NOT NULL,
	`user_id` text NOT NULL,
	`return_url` text NOT NULL,
	`expires_at` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `portal_sessions_account` ON `portal_sessions` (`account_id`,`livemode`,`id`);--> statement-breakpoint
ALTER TABLE `users` ADD `default_payment_method_id` text;