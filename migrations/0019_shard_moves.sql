-- Shards (issue 22): an account moved to another shard leaves its row here with moved_to, and its
-- keys paused (paused_at), so that a credential naming this shard finds the shard it lives on now.
-- move_token and move_until hold the one move of an account in progress. The account_id indexes let
-- a move page through an account's rows of every table by index (src/accounts/move.ts).
ALTER TABLE `accounts` ADD `moved_to` integer;--> statement-breakpoint
ALTER TABLE `accounts` ADD `move_token` text;--> statement-breakpoint
ALTER TABLE `accounts` ADD `move_until` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `paused_at` text;--> statement-breakpoint
CREATE INDEX `access_tokens_account` ON `access_tokens` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `coupon_redemptions_account` ON `coupon_redemptions` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `dashboard_sessions_account` ON `dashboard_sessions` (`account_id`,`token_hash`);--> statement-breakpoint
CREATE INDEX `invoice_items_account` ON `invoice_items` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `invoice_lines_account` ON `invoice_lines` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `proration_charges_account` ON `proration_charges` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `subscription_periods_account` ON `subscription_periods` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `usage_records_account` ON `usage_records` (`account_id`,`id`);