-- Shards (issue 22): an account moved to another shard leaves its row here with moved_to, and its
-- keys paused (paused_at), so that a credential naming this shard finds the shard it lives on now.
-- move_token and move_until hold the one move of an account in progress.
ALTER TABLE `accounts` ADD `moved_to` integer;--> statement-breakpoint
ALTER TABLE `accounts` ADD `move_token` text;--> statement-breakpoint
ALTER TABLE `accounts` ADD `move_until` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `paused_at` text;