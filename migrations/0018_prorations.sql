-- Proration (issue 21): pending invoice items (a prorated change's credit and charge, a credit carried from
-- an invoice whose total would have been negative), a subscription's open charge and pending items, and
-- what a period's claim priced in of them.
CREATE TABLE `invoice_items` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`subscription_id` text NOT NULL,
	`type` text NOT NULL,
	`description` text NOT NULL,
	`quantity` integer NOT NULL,
	`amount` integer NOT NULL,
	`currency` text NOT NULL,
	`period_start` text NOT NULL,
	`period_end` text NOT NULL,
	`invoice_id` text,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `invoice_items_pending` ON `invoice_items` (`subscription_id`,`invoice_id`,`id`);--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `items` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `items_amount` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `credit_carried` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `open_charge` text;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `pending_items` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `pending_items_amount` integer DEFAULT 0 NOT NULL;