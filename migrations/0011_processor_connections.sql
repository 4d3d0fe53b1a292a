-- Issue 20: live mode moves money through the account's Stripe account.
--
-- processor_connections: one per account (PUT /api/processor). The Stripe secret key and webhook
-- secrets are stored only as AES-GCM ciphertexts (`<key id>:<iv>:<ciphertext>`, base64), each
-- bound to its account and field, under the key PROCESSOR_ENCRYPTION_KEY names by that id; the
-- last 4 characters of the secret key are kept in clear, to show which key is connected. Every
-- connection is a live-mode one (test mode is the sandbox), which the CHECK keeps true.
--
-- processor_events: each Stripe event applied, by its id, written in the same batch as its effect,
-- so a redelivered event changes nothing the second time.
--
-- users.stripe_account: the Stripe connected account (acct_…) a live-mode user is paid out to.
-- payments_processor_reference: a dispute names the PaymentIntent, found through this index.
CREATE TABLE `processor_connections` (
	`account_id` text PRIMARY KEY NOT NULL,
	`livemode` integer DEFAULT true NOT NULL,
	`provider` text NOT NULL,
	`processor_account` text NOT NULL,
	`secret_key_encrypted` text NOT NULL,
	`secret_key_last4` text NOT NULL,
	`webhook_secret_encrypted` text NOT NULL,
	`connect_webhook_secret_encrypted` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "processor_connections_live_only" CHECK("processor_connections"."livemode" = 1)
);
--> statement-breakpoint
CREATE TABLE `processor_events` (
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT true NOT NULL,
	`provider` text NOT NULL,
	`event_id` text NOT NULL,
	`type` text NOT NULL,
	`outcome` text NOT NULL,
	`object_id` text,
	`received_at` text NOT NULL,
	PRIMARY KEY(`account_id`, `event_id`)
);
--> statement-breakpoint
CREATE INDEX `processor_events_received` ON `processor_events` (`received_at`);--> statement-breakpoint
ALTER TABLE `users` ADD `stripe_account` text;--> statement-breakpoint
CREATE INDEX `payments_processor_reference` ON `payments` (`account_id`,`livemode`,`processor_reference`);
