CREATE TABLE `money_claims` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`processor_account` text,
	`purpose` text NOT NULL,
	`created_at` text NOT NULL,
	`lease_until` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `money_claims_account` ON `money_claims` (`account_id`,`lease_until`);