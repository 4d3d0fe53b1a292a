-- Test and live mode apart. Every account-owned table gets `livemode` (0 test, 1 live); every row
-- written before modes existed is a test-mode row. API keys already had `mode`: their `livemode`
-- is derived from it (a generated column), so the two can never disagree. Indexes lead with
-- (account_id, livemode), so neither mode's queries read the other's rows. Idempotency-Keys are
-- scoped to (account, mode, key): the primary key changes, so that table is rebuilt.
ALTER TABLE `api_keys` ADD `livemode` integer NOT NULL GENERATED ALWAYS AS (mode = 'live') VIRTUAL;--> statement-breakpoint
ALTER TABLE `request_ids` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `test_clocks` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `users` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `events` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `webhook_endpoints` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `delivery_attempts` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `payouts` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `payments` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `refunds` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `plans` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `livemode` integer DEFAULT false NOT NULL;--> statement-breakpoint
DROP INDEX `api_keys_account`;--> statement-breakpoint
CREATE INDEX `api_keys_account` ON `api_keys` (`account_id`,`livemode`,`id`);--> statement-breakpoint
DROP INDEX `request_ids_account`;--> statement-breakpoint
CREATE INDEX `request_ids_account` ON `request_ids` (`account_id`,`livemode`,`id`);--> statement-breakpoint
DROP INDEX `test_clocks_account`;--> statement-breakpoint
CREATE INDEX `test_clocks_account` ON `test_clocks` (`account_id`,`livemode`,`id`);--> statement-breakpoint
DROP INDEX `users_account`;--> statement-breakpoint
CREATE INDEX `users_account` ON `users` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `events_account_mode_feed` ON `events` (`account_id`,`livemode`,`feed_position`);--> statement-breakpoint
DROP INDEX `events_account_type_feed`;--> statement-breakpoint
CREATE INDEX `events_account_type_feed` ON `events` (`account_id`,`livemode`,`type`,`feed_position`);--> statement-breakpoint
DROP INDEX `webhook_endpoints_account`;--> statement-breakpoint
CREATE INDEX `webhook_endpoints_account` ON `webhook_endpoints` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_account` ON `webhook_deliveries` (`account_id`,`livemode`,`status`);--> statement-breakpoint
CREATE INDEX `delivery_attempts_account` ON `delivery_attempts` (`account_id`,`livemode`,`attempted_at`);--> statement-breakpoint
DROP INDEX `payouts_account`;--> statement-breakpoint
CREATE INDEX `payouts_account` ON `payouts` (`account_id`,`livemode`,`id`);--> statement-breakpoint
DROP INDEX `payments_account`;--> statement-breakpoint
CREATE INDEX `payments_account` ON `payments` (`account_id`,`livemode`,`id`);--> statement-breakpoint
DROP INDEX `payments_subscription`;--> statement-breakpoint
CREATE INDEX `payments_subscription` ON `payments` (`account_id`,`livemode`,`subscription_id`,`id`);--> statement-breakpoint
DROP INDEX `payments_user`;--> statement-breakpoint
CREATE INDEX `payments_user` ON `payments` (`account_id`,`livemode`,`user_id`,`id`);--> statement-breakpoint
DROP INDEX `refunds_account`;--> statement-breakpoint
CREATE INDEX `refunds_account` ON `refunds` (`account_id`,`livemode`,`id`);--> statement-breakpoint
DROP INDEX `refunds_payment`;--> statement-breakpoint
CREATE INDEX `refunds_payment` ON `refunds` (`account_id`,`livemode`,`payment_id`,`id`);--> statement-breakpoint
DROP INDEX `plans_account`;--> statement-breakpoint
CREATE INDEX `plans_account` ON `plans` (`account_id`,`livemode`,`id`);--> statement-breakpoint
DROP INDEX `subscriptions_account`;--> statement-breakpoint
CREATE INDEX `subscriptions_account` ON `subscriptions` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `subscriptions_account_user` ON `subscriptions` (`account_id`,`livemode`,`user_id`,`id`);--> statement-breakpoint
CREATE TABLE `__new_idempotency_keys` (
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`key` text NOT NULL,
	`request_hash` text NOT NULL,
	`claim_token` text NOT NULL,
	`status` text NOT NULL,
	`response_status` integer,
	`response_body` text,
	`created_at` text NOT NULL,
	`locked_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`account_id`, `livemode`, `key`)
);
--> statement-breakpoint
INSERT INTO `__new_idempotency_keys` (`account_id`, `livemode`, `key`, `request_hash`, `claim_token`, `status`, `response_status`, `response_body`, `created_at`, `locked_at`, `expires_at`)
  SELECT `account_id`, false, `key`, `request_hash`, `claim_token`, `status`, `response_status`, `response_body`, `created_at`, `locked_at`, `expires_at` FROM `idempotency_keys`;--> statement-breakpoint
DROP TABLE `idempotency_keys`;--> statement-breakpoint
ALTER TABLE `__new_idempotency_keys` RENAME TO `idempotency_keys`;--> statement-breakpoint
CREATE INDEX `idempotency_keys_expiry` ON `idempotency_keys` (`expires_at`);
