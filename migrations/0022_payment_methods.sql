CREATE TABLE `payment_methods` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`user_id` text NOT NULL,
	`type` text NOT NULL,
	`card_brand` text NOT NULL,
	`card_last4` text NOT NULL,
	`card_exp_month` integer NOT NULL,
	`card_exp_year` integer NOT NULL,
	`card_fingerprint` text NOT NULL,
	`processor_token` text NOT NULL,
	`attach_reference` text NOT NULL,
	`created_at` text NOT NULL,
	`detached_at` text
);
--> statement-breakpoint
CREATE INDEX `payment_methods_account` ON `payment_methods` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `payment_methods_user` ON `payment_methods` (`account_id`,`livemode`,`user_id`,`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `payment_methods_attach_reference` ON `payment_methods` (`account_id`,`livemode`,`attach_reference`);--> statement-breakpoint
ALTER TABLE `processor_connections` ADD `raw_card_data` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `processor_connections` ADD `publishable_key` text;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `payment_method_id` text;--> statement-breakpoint
CREATE INDEX `subscriptions_payment_method` ON `subscriptions` (`payment_method_id`);--> statement-breakpoint
-- Hand-written: connections made before raw_card_data existed sent card numbers to Stripe, and keep doing so.
UPDATE `processor_connections` SET `raw_card_data` = 1;
