CREATE TABLE `tax_rates` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`display_name` text NOT NULL,
	`percentage` integer NOT NULL,
	`inclusive` integer NOT NULL,
	`country` text,
	`state` text,
	`description` text,
	`active` integer DEFAULT true NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	CONSTRAINT "tax_rates_percentage" CHECK("tax_rates"."percentage" BETWEEN 0 AND 1000000)
);
--> statement-breakpoint
CREATE INDEX `tax_rates_account` ON `tax_rates` (`account_id`,`livemode`,`id`);--> statement-breakpoint
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_invoices` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`number_sequence` integer,
	`number` text GENERATED ALWAYS AS (CASE WHEN number_sequence IS NULL THEN NULL ELSE upper(substr(account_id, -8)) || '-' || printf('%04d', number_sequence) END) VIRTUAL,
	`status` text NOT NULL,
	`subscription_id` text,
	`period_index` integer,
	`user_id` text,
	`currency` text NOT NULL,
	`period_start` text NOT NULL,
	`period_end` text NOT NULL,
	`subtotal` integer NOT NULL,
	`discount` integer DEFAULT 0 NOT NULL,
	`total` integer NOT NULL,
	`tax` integer DEFAULT 0 NOT NULL,
	`exclusive_tax` integer DEFAULT 0 NOT NULL,
	`total_tax_amounts` text DEFAULT '[]' NOT NULL,
	`amount_paid` integer DEFAULT 0 NOT NULL,
	`amount_due` integer NOT NULL,
	`payment_id` text,
	`customer_name` text,
	`customer_email` text,
	`account_name` text,
	`account_email` text,
	`hosted_invoice_url` text,
	`created_at` text NOT NULL,
	`finalized_at` text,
	`paid_at` text,
	`voided_at` text,
	`updated_at` text NOT NULL,
	CONSTRAINT "invoices_total" CHECK("__new_invoices"."total" = "__new_invoices"."subtotal" - "__new_invoices"."discount" + "__new_invoices"."exclusive_tax" AND "__new_invoices"."discount" >= 0 AND "__new_invoices"."amount_due" >= 0 AND "__new_invoices"."amount_paid" >= 0)
);
--> statement-breakpoint
-- Hand-edited: the copy leaves out the generated column `number` and the new tax columns (their defaults: no tax).
INSERT INTO `__new_invoices`("id", "account_id", "livemode", "number_sequence", "status", "subscription_id", "period_index", "user_id", "currency", "period_start", "period_end", "subtotal", "discount", "total", "amount_paid", "amount_due", "payment_id", "customer_name", "customer_email", "account_name", "account_email", "hosted_invoice_url", "created_at", "finalized_at", "paid_at", "voided_at", "updated_at") SELECT "id", "account_id", "livemode", "number_sequence", "status", "subscription_id", "period_index", "user_id", "currency", "period_start", "period_end", "subtotal", "discount", "total", "amount_paid", "amount_due", "payment_id", "customer_name", "customer_email", "account_name", "account_email", "hosted_invoice_url", "created_at", "finalized_at", "paid_at", "voided_at", "updated_at" FROM `invoices`;--> statement-breakpoint
DROP TABLE `invoices`;--> statement-breakpoint
ALTER TABLE `__new_invoices` RENAME TO `invoices`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `invoices_number` ON `invoices` (`account_id`,`livemode`,`number_sequence`);--> statement-breakpoint
CREATE UNIQUE INDEX `invoices_period` ON `invoices` (`subscription_id`,`period_index`);--> statement-breakpoint
CREATE INDEX `invoices_account` ON `invoices` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `invoices_subscription` ON `invoices` (`account_id`,`livemode`,`subscription_id`,`id`);--> statement-breakpoint
CREATE INDEX `invoices_user` ON `invoices` (`account_id`,`livemode`,`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `invoices_status` ON `invoices` (`account_id`,`livemode`,`status`,`id`);--> statement-breakpoint
ALTER TABLE `invoice_lines` ADD `tax_amounts` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `plans` ADD `default_tax_rates` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `tax` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `default_tax_rates` text;