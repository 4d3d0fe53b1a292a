-- Shards (issue 22): an account moved to another shard leaves its row here with moved_to, and its
-- keys paused (paused_at), so that a credential naming this shard finds the shard it lives on now.
ALTER TABLE `accounts` ADD `moved_to` integer;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `paused_at` text;