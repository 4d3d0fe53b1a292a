PRAGMA foreign_keys=OFF;--> statement-breakpoint
-- Hand-written: migration 0020's refund trigger reads payments, and SQLite refuses to rename a table
-- while a trigger names one that is missing; it is made again at the end.
DROP TRIGGER IF EXISTS `refunds_processor_account`;--> statement-breakpoint
CREATE TABLE `__new_payments` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`user_id` text,
	`subscription_id` text,
	`amount` integer NOT NULL,
	`currency` text NOT NULL,
	`status` text NOT NULL,
	`amount_refunded` integer DEFAULT 0 NOT NULL,
	`capture_method` text DEFAULT 'automatic' NOT NULL,
	`amount_capturable` integer DEFAULT 0 NOT NULL,
	`amount_received` integer DEFAULT 0 NOT NULL,
	`next_action` text,
	`payment_method_id` text,
	`description` text,
	`metadata` text,
	`capture_before` text,
	`canceled_at` text,
	`cancellation_reason` text,
	`failure_code` text,
	`failure_message` text,
	`card_brand` text NOT NULL,
	`card_last4` text NOT NULL,
	`card_exp_month` integer NOT NULL,
	`card_exp_year` integer NOT NULL,
	`card_fingerprint` text NOT NULL,
	`processor_reference` text,
	`processor_account` text,
	`charge_reference` text,
	`invoice_id` text,
	`created_at` text NOT NULL,
	CONSTRAINT "payments_amount_positive" CHECK("__new_payments"."amount" > 0),
	CONSTRAINT "payments_refund_within_amount" CHECK("__new_payments"."amount_refunded" >= 0 AND "__new_payments"."amount_refunded" <= "__new_payments"."amount_received"),
	CONSTRAINT "payments_received_within_amount" CHECK("__new_payments"."amount_received" >= 0 AND "__new_payments"."amount_received" <= "__new_payments"."amount"),
	CONSTRAINT "payments_capturable_within_amount" CHECK("__new_payments"."amount_capturable" >= 0 AND "__new_payments"."amount_capturable" <= "__new_payments"."amount")
);
--> statement-breakpoint
-- Hand-written (drizzle-kit copied columns the old table does not have): every payment until now
-- was captured at once, so what it received is its amount unless it failed.
INSERT INTO `__new_payments`("id", "account_id", "livemode", "user_id", "subscription_id", "amount", "currency", "status", "amount_refunded", "capture_method", "amount_capturable", "amount_received", "failure_code", "failure_message", "card_brand", "card_last4", "card_exp_month", "card_exp_year", "card_fingerprint", "processor_reference", "processor_account", "charge_reference", "invoice_id", "created_at") SELECT "id", "account_id", "livemode", "user_id", "subscription_id", "amount", "currency", "status", "amount_refunded", 'automatic', 0, CASE WHEN "status" = 'failed' THEN 0 ELSE "amount" END, "failure_code", "failure_message", "card_brand", "card_last4", "card_exp_month", "card_exp_year", "card_fingerprint", "processor_reference", "processor_account", "charge_reference", "invoice_id", "created_at" FROM `payments`;--> statement-breakpoint
DROP TABLE `payments`;--> statement-breakpoint
ALTER TABLE `__new_payments` RENAME TO `payments`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `payments_charge_reference` ON `payments` (`charge_reference`);--> statement-breakpoint
CREATE INDEX `payments_account` ON `payments` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `payments_subscription` ON `payments` (`account_id`,`livemode`,`subscription_id`,`id`);--> statement-breakpoint
CREATE INDEX `payments_user` ON `payments` (`account_id`,`livemode`,`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `payments_processor_reference` ON `payments` (`account_id`,`livemode`,`processor_reference`);--> statement-breakpoint
CREATE INDEX `payments_capture_before` ON `payments` (`status`,`capture_before`);--> statement-breakpoint
-- Hand-written: DROP TABLE took the trigger of migration 0020 with it; the rebuilt table gets it back.
CREATE TRIGGER `payments_processor_account` AFTER INSERT ON `payments` WHEN NEW.`livemode` = 1 AND NEW.`processor_account` IS NULL
BEGIN
  UPDATE `payments` SET `processor_account` = COALESCE((SELECT `processor_account` FROM `processor_connections` c WHERE c.`account_id` = NEW.`account_id`), '') WHERE `id` = NEW.`id`;
END;--> statement-breakpoint
CREATE TRIGGER `refunds_processor_account` AFTER INSERT ON `refunds` WHEN NEW.`livemode` = 1 AND NEW.`processor_account` IS NULL
BEGIN
  UPDATE `refunds` SET `processor_account` = COALESCE((SELECT p.`processor_account` FROM `payments` p WHERE p.`id` = NEW.`payment_id`), '') WHERE `id` = NEW.`id`;
END;
