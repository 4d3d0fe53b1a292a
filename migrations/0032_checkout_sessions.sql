CREATE TABLE `checkout_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`key_id` text NOT NULL,
	`page_secret` text NOT NULL,
	`mode` text NOT NULL,
	`status` text NOT NULL,
	`user_id` text NOT NULL,
	`plan_id` text,
	`amount` integer,
	`currency` text,
	`success_url` text NOT NULL,
	`cancel_url` text NOT NULL,
	`metadata` text,
	`expires_at` text NOT NULL,
	`payment_id` text,
	`subscription_id` text,
	`payment_method_id` text,
	`attempt` integer DEFAULT 0 NOT NULL,
	`submit_until` integer,
	`attempt_payment_method_id` text,
	`created_at` text NOT NULL,
	`completed_at` text,
	`expired_at` text,
	CONSTRAINT "checkout_sessions_amount" CHECK("checkout_sessions"."amount" IS NULL OR "checkout_sessions"."amount" > 0)
);
--> statement-breakpoint
CREATE INDEX `checkout_sessions_account` ON `checkout_sessions` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `checkout_sessions_expiry` ON `checkout_sessions` (`status`,`expires_at`);