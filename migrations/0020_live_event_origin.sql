CREATE TABLE `retired_processor_connections` (
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT true NOT NULL,
	`provider` text NOT NULL,
	`processor_account` text NOT NULL,
	`secret_key_encrypted` text NOT NULL,
	`secret_key_last4` text NOT NULL,
	`webhook_secret_encrypted` text NOT NULL,
	`connect_webhook_secret_encrypted` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`retired_at` text NOT NULL,
	PRIMARY KEY(`account_id`, `processor_account`),
	CONSTRAINT "retired_processor_connections_live_only" CHECK("retired_processor_connections"."livemode" = 1)
);
--> statement-breakpoint
ALTER TABLE `payments` ADD `processor_account` text;--> statement-breakpoint
ALTER TABLE `payouts` ADD `processor_account` text;--> statement-breakpoint
ALTER TABLE `payouts` ADD `processor_object` text;--> statement-breakpoint
ALTER TABLE `refunds` ADD `processor_account` text;--> statement-breakpoint
ALTER TABLE `refunds` ADD `processor_object` text;--> statement-breakpoint
-- Hand-written (issue 33): the Stripe account each live object was made through. Existing live rows
-- take their account's connection (or '' when it has none: unknown, so no event settles them).
UPDATE `payments` SET `processor_account` = COALESCE((SELECT `processor_account` FROM `processor_connections` c WHERE c.`account_id` = `payments`.`account_id`), '') WHERE `livemode` = 1;--> statement-breakpoint
UPDATE `payouts` SET `processor_account` = COALESCE((SELECT `processor_account` FROM `processor_connections` c WHERE c.`account_id` = `payouts`.`account_id`), '') WHERE `livemode` = 1;--> statement-breakpoint
UPDATE `refunds` SET `processor_account` = COALESCE((SELECT p.`processor_account` FROM `payments` p WHERE p.`id` = `refunds`.`payment_id`), '') WHERE `livemode` = 1;--> statement-breakpoint
-- New live rows: a payment or payout is made through the account's connection as it is when the row
-- is written (right as long as a live write's batch commits only against the connection it used:
-- issue 33 item 3), a refund through its payment's. '' when there is none, never NULL, so that an account move's copy (which carries the
-- value) never has it filled in differently on the target.
CREATE TRIGGER `payments_processor_account` AFTER INSERT ON `payments` WHEN NEW.`livemode` = 1 AND NEW.`processor_account` IS NULL
BEGIN
  UPDATE `payments` SET `processor_account` = COALESCE((SELECT `processor_account` FROM `processor_connections` c WHERE c.`account_id` = NEW.`account_id`), '') WHERE `id` = NEW.`id`;
END;--> statement-breakpoint
CREATE TRIGGER `payouts_processor_account` AFTER INSERT ON `payouts` WHEN NEW.`livemode` = 1 AND NEW.`processor_account` IS NULL
BEGIN
  UPDATE `payouts` SET `processor_account` = COALESCE((SELECT `processor_account` FROM `processor_connections` c WHERE c.`account_id` = NEW.`account_id`), '') WHERE `id` = NEW.`id`;
END;--> statement-breakpoint
CREATE TRIGGER `refunds_processor_account` AFTER INSERT ON `refunds` WHEN NEW.`livemode` = 1 AND NEW.`processor_account` IS NULL
BEGIN
  UPDATE `refunds` SET `processor_account` = COALESCE((SELECT p.`processor_account` FROM `payments` p WHERE p.`id` = NEW.`payment_id`), '') WHERE `id` = NEW.`id`;
END;
