-- Proration (issue 21): pending invoice items (a prorated change's credit and charge, a credit carried from
-- an invoice whose total would have been negative), a subscription's open charge, pending items and change
-- scheduled for the next period, what a period's claim priced in of them (and the percentage its discount
-- took off), and the charges of changes invoiced at once (always_invoice).
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
CREATE TABLE `proration_charges` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`subscription_id` text NOT NULL,
	`invoice_id` text NOT NULL,
	`reference` text NOT NULL,
	`amount` integer NOT NULL,
	`currency` text NOT NULL,
	`status` text NOT NULL,
	`change` text NOT NULL,
	`payment_id` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	CONSTRAINT "proration_charges_amount" CHECK("proration_charges"."amount" > 0)
);
--> statement-breakpoint
CREATE UNIQUE INDEX `proration_charges_reference` ON `proration_charges` (`reference`);--> statement-breakpoint
CREATE UNIQUE INDEX `proration_charges_claimed` ON `proration_charges` (`subscription_id`) WHERE status = 'claimed';--> statement-breakpoint
CREATE INDEX `proration_charges_stale` ON `proration_charges` (`status`,`updated_at`);--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `items` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `items_amount` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `credit_carried` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `percent_off` integer;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `open_charge` text;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `pending_items` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `pending_items_amount` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `pending_plan_id` text;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `pending_quantity` integer;