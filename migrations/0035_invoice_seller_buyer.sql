ALTER TABLE `accounts` ADD `business_name` text;--> statement-breakpoint
ALTER TABLE `accounts` ADD `address` text;--> statement-breakpoint
ALTER TABLE `accounts` ADD `tax_id` text;--> statement-breakpoint
ALTER TABLE `accounts` ADD `invoice_footer` text;--> statement-breakpoint
ALTER TABLE `invoices` ADD `customer_address` text;--> statement-breakpoint
ALTER TABLE `invoices` ADD `customer_tax_ids` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `invoices` ADD `account_address` text;--> statement-breakpoint
ALTER TABLE `invoices` ADD `account_tax_ids` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
ALTER TABLE `invoices` ADD `footer` text;--> statement-breakpoint
ALTER TABLE `invoices` ADD `coupon_id` text;--> statement-breakpoint
ALTER TABLE `invoices` ADD `coupon_name` text;--> statement-breakpoint
ALTER TABLE `invoices` ADD `test_clock_id` text;--> statement-breakpoint
ALTER TABLE `users` ADD `address` text;--> statement-breakpoint
ALTER TABLE `users` ADD `tax_ids` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
-- Hand-written: invoices made before this migration name their user's test clock (a user's clock never changes).
UPDATE `invoices` SET `test_clock_id` = (SELECT `users`.`test_clock_id` FROM `users` WHERE `users`.`id` = `invoices`.`user_id`) WHERE `user_id` IS NOT NULL;
