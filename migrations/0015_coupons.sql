-- Coupons (issue 21): coupons and their redemptions; a subscription's discount (coupon_id,
-- discount_start, discount_end, discount_uses); a period's discount (its amount is what it charges).
CREATE TABLE `coupon_redemptions` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`coupon_pk` text NOT NULL,
	`subscription_id` text,
	`reference` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `coupon_redemptions_reference` ON `coupon_redemptions` (`reference`);--> statement-breakpoint
CREATE TABLE `coupons` (
	`pk` text PRIMARY KEY NOT NULL,
	`id` text NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`name` text NOT NULL,
	`percent_off_basis_points` integer,
	`amount_off` integer,
	`currency` text,
	`duration` text NOT NULL,
	`duration_in_months` integer,
	`max_redemptions` integer,
	`redeem_by` text,
	`times_redeemed` integer DEFAULT 0 NOT NULL,
	`valid` integer DEFAULT true NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`deleted_at` text,
	CONSTRAINT "coupons_redemptions" CHECK("coupons"."max_redemptions" IS NULL OR "coupons"."times_redeemed" <= "coupons"."max_redemptions"),
	CONSTRAINT "coupons_value" CHECK(("coupons"."percent_off_basis_points" IS NULL) <> ("coupons"."amount_off" IS NULL) AND ("coupons"."amount_off" IS NULL) = ("coupons"."currency" IS NULL))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `coupons_account_id` ON `coupons` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `coupons_account` ON `coupons` (`account_id`,`livemode`,`pk`);--> statement-breakpoint
ALTER TABLE `subscription_periods` ADD `discount` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `coupon_id` text;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `discount_start` text;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `discount_end` text;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `discount_uses` integer DEFAULT 0 NOT NULL;