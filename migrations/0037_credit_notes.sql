CREATE TABLE `credit_notes` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`number_sequence` integer NOT NULL,
	`number` text GENERATED ALWAYS AS (upper(substr(account_id, -8)) || '-CN-' || printf('%04d', number_sequence)) VIRTUAL,
	`invoice_id` text NOT NULL,
	`user_id` text,
	`currency` text NOT NULL,
	`amount` integer NOT NULL,
	`tax` integer DEFAULT 0 NOT NULL,
	`exclusive_tax` integer DEFAULT 0 NOT NULL,
	`tax_amounts` text DEFAULT '[]' NOT NULL,
	`lines` text NOT NULL,
	`reason` text,
	`memo` text,
	`refund_id` text,
	`balance_transaction_id` text,
	`status` text NOT NULL,
	`created_at` text NOT NULL,
	`voided_at` text,
	CONSTRAINT "credit_notes_amount_positive" CHECK("credit_notes"."amount" > 0)
);
--> statement-breakpoint
CREATE UNIQUE INDEX `credit_notes_number` ON `credit_notes` (`account_id`,`livemode`,`number_sequence`);--> statement-breakpoint
CREATE INDEX `credit_notes_account` ON `credit_notes` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `credit_notes_invoice` ON `credit_notes` (`invoice_id`,`status`);--> statement-breakpoint
CREATE UNIQUE INDEX `credit_notes_refund` ON `credit_notes` (`refund_id`);--> statement-breakpoint
CREATE TABLE `customer_balance_transactions` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`user_id` text NOT NULL,
	`amount` integer NOT NULL,
	`currency` text NOT NULL,
	`type` text NOT NULL,
	`credit_note_id` text,
	`invoice_id` text,
	`source` text NOT NULL,
	`ending_balance` integer NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `customer_balance_transactions_source` ON `customer_balance_transactions` (`source`);--> statement-breakpoint
CREATE INDEX `customer_balance_transactions_user` ON `customer_balance_transactions` (`account_id`,`livemode`,`user_id`,`id`);--> statement-breakpoint
ALTER TABLE `invoices` ADD `starting_balance` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `invoices` ADD `ending_balance` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `balance_applied` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `starting_balance` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `users` ADD `balance` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `users` ADD `currency` text;