CREATE TABLE `access_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`key_id` text NOT NULL,
	`hash` text NOT NULL,
	`scopes` text NOT NULL,
	`created_at` text NOT NULL,
	`expires_at` text NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`key_id`) REFERENCES `api_keys`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `access_tokens_hash` ON `access_tokens` (`hash`);--> statement-breakpoint
CREATE INDEX `access_tokens_key` ON `access_tokens` (`key_id`);--> statement-breakpoint
CREATE TABLE `accounts` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`email` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `api_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text,
	`kind` text NOT NULL,
	`mode` text NOT NULL,
	`prefix` text NOT NULL,
	`hash` text NOT NULL,
	`scopes` text NOT NULL,
	`created_at` text NOT NULL,
	`revoked_at` text,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `api_keys_hash` ON `api_keys` (`hash`);--> statement-breakpoint
CREATE INDEX `api_keys_account` ON `api_keys` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `batch_guards` (
	`reason` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `delivery_attempts` (
	`id` text PRIMARY KEY NOT NULL,
	`delivery_id` text NOT NULL,
	`account_id` text NOT NULL,
	`attempt_number` integer NOT NULL,
	`attempted_at` text NOT NULL,
	`status_code` integer,
	`duration_ms` integer NOT NULL,
	`response_excerpt` text,
	`error` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `delivery_attempts_delivery_number` ON `delivery_attempts` (`delivery_id`,`attempt_number`);--> statement-breakpoint
CREATE TABLE `events` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `events_account` ON `events` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `events_account_type` ON `events` (`account_id`,`type`,`id`);--> statement-breakpoint
CREATE TABLE `idempotency_keys` (
	`account_id` text NOT NULL,
	`key` text NOT NULL,
	`request_hash` text NOT NULL,
	`claim_token` text NOT NULL,
	`status` text NOT NULL,
	`response_status` integer,
	`response_body` text,
	`created_at` text NOT NULL,
	`locked_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`account_id`, `key`)
);
--> statement-breakpoint
CREATE INDEX `idempotency_keys_expiry` ON `idempotency_keys` (`expires_at`);--> statement-breakpoint
CREATE TABLE `job_runs` (
	`key` text PRIMARY KEY NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `payments` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`user_id` text,
	`subscription_id` text,
	`amount` integer NOT NULL,
	`currency` text NOT NULL,
	`status` text NOT NULL,
	`amount_refunded` integer DEFAULT 0 NOT NULL,
	`failure_code` text,
	`failure_message` text,
	`card_brand` text NOT NULL,
	`card_last4` text NOT NULL,
	`card_exp_month` integer NOT NULL,
	`card_exp_year` integer NOT NULL,
	`card_fingerprint` text NOT NULL,
	`processor_reference` text,
	`created_at` text NOT NULL,
	CONSTRAINT "payments_amount_positive" CHECK("payments"."amount" > 0),
	CONSTRAINT "payments_refund_within_amount" CHECK("payments"."amount_refunded" >= 0 AND "payments"."amount_refunded" <= "payments"."amount")
);
--> statement-breakpoint
CREATE INDEX `payments_account` ON `payments` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `payments_subscription` ON `payments` (`subscription_id`,`id`);--> statement-breakpoint
CREATE INDEX `payments_user` ON `payments` (`user_id`,`id`);--> statement-breakpoint
CREATE TABLE `payouts` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`recipient_id` text,
	`amount` integer NOT NULL,
	`currency` text NOT NULL,
	`description` text,
	`status` text NOT NULL,
	`failure_code` text,
	`failure_message` text,
	`card_brand` text NOT NULL,
	`card_last4` text NOT NULL,
	`card_exp_month` integer NOT NULL,
	`card_exp_year` integer NOT NULL,
	`card_fingerprint` text NOT NULL,
	`processor_token` text NOT NULL,
	`date` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	CONSTRAINT "payouts_amount_positive" CHECK("payouts"."amount" > 0)
);
--> statement-breakpoint
CREATE INDEX `payouts_account` ON `payouts` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `plans` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`currency` text NOT NULL,
	`interval` text NOT NULL,
	`pricing_model` text NOT NULL,
	`unit_amount` integer,
	`tiers` text,
	`active` integer NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `plans_account` ON `plans` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `refunds` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`payment_id` text NOT NULL,
	`amount` integer NOT NULL,
	`currency` text NOT NULL,
	`reason` text,
	`status` text NOT NULL,
	`created_at` text NOT NULL,
	`completed_at` text,
	CONSTRAINT "refunds_amount_positive" CHECK("refunds"."amount" > 0)
);
--> statement-breakpoint
CREATE INDEX `refunds_account` ON `refunds` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `refunds_payment` ON `refunds` (`payment_id`);--> statement-breakpoint
CREATE TABLE `request_ids` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`purpose` text NOT NULL,
	`metadata` text,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `request_ids_account` ON `request_ids` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `subscription_periods` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`subscription_id` text NOT NULL,
	`period_index` integer NOT NULL,
	`period_start` text NOT NULL,
	`amount` integer NOT NULL,
	`currency` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`payment_id` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `subscription_periods_once` ON `subscription_periods` (`subscription_id`,`period_index`);--> statement-breakpoint
CREATE TABLE `subscriptions` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`user_id` text NOT NULL,
	`plan_id` text NOT NULL,
	`status` text NOT NULL,
	`quantity` integer DEFAULT 1 NOT NULL,
	`card_brand` text NOT NULL,
	`card_last4` text NOT NULL,
	`card_exp_month` integer NOT NULL,
	`card_exp_year` integer NOT NULL,
	`card_fingerprint` text NOT NULL,
	`processor_token` text NOT NULL,
	`start_date` text NOT NULL,
	`billing_anchor` text NOT NULL,
	`periods_billed` integer NOT NULL,
	`current_period_start` text NOT NULL,
	`next_billing_date` text NOT NULL,
	`due_at` integer,
	`dunning_attempts` integer DEFAULT 0 NOT NULL,
	`cancel_at_period_end` integer DEFAULT false NOT NULL,
	`canceled_at` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	CONSTRAINT "subscriptions_quantity_positive" CHECK("subscriptions"."quantity" > 0)
);
--> statement-breakpoint
CREATE INDEX `subscriptions_account` ON `subscriptions` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `subscriptions_user` ON `subscriptions` (`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `subscriptions_due` ON `subscriptions` (`due_at`);--> statement-breakpoint
CREATE TABLE `test_clocks` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text,
	`frozen_time` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `test_clocks_account` ON `test_clocks` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`email` text NOT NULL,
	`test_clock_id` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `users_account` ON `users` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`event_id` text NOT NULL,
	`endpoint_id` text NOT NULL,
	`status` text NOT NULL,
	`attempt_count` integer DEFAULT 0 NOT NULL,
	`first_attempt_at` integer,
	`next_attempt_at` integer,
	`last_status_code` integer,
	`last_error` text,
	`created_at` text NOT NULL,
	`updated_at` integer NOT NULL,
	`delivered_at` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_deliveries_event_endpoint` ON `webhook_deliveries` (`event_id`,`endpoint_id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_endpoint` ON `webhook_deliveries` (`endpoint_id`,`id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_pending` ON `webhook_deliveries` (`status`,`updated_at`);--> statement-breakpoint
CREATE TABLE `webhook_endpoints` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`url` text NOT NULL,
	`events` text NOT NULL,
	`status` text NOT NULL,
	`disabled_reason` text,
	`secret` text NOT NULL,
	`previous_secret` text,
	`previous_secret_expires_at` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`deleted_at` text
);
--> statement-breakpoint
CREATE INDEX `webhook_endpoints_account` ON `webhook_endpoints` (`account_id`,`id`);