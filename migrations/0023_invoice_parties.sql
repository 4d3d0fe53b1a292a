ALTER TABLE `invoices` ADD `customer_name` text;--> statement-breakpoint
ALTER TABLE `invoices` ADD `customer_email` text;--> statement-breakpoint
ALTER TABLE `invoices` ADD `account_name` text;--> statement-breakpoint
ALTER TABLE `invoices` ADD `account_email` text;--> statement-breakpoint
-- Hand-written backfill: invoices finalized before this migration freeze what their parties are
-- called now (the closest there is to what they were called when issued). Drafts stay NULL: a
-- draft shows the live values until it is finalized.
UPDATE `invoices` SET
  `customer_name` = (SELECT `users`.`name` FROM `users` WHERE `users`.`id` = `invoices`.`user_id` AND `users`.`account_id` = `invoices`.`account_id`),
  `customer_email` = (SELECT `users`.`email` FROM `users` WHERE `users`.`id` = `invoices`.`user_id` AND `users`.`account_id` = `invoices`.`account_id`),
  `account_name` = (SELECT `accounts`.`name` FROM `accounts` WHERE `accounts`.`id` = `invoices`.`account_id`),
  `account_email` = (SELECT `accounts`.`email` FROM `accounts` WHERE `accounts`.`id` = `invoices`.`account_id`)
WHERE `status` <> 'draft';
