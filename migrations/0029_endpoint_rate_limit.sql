ALTER TABLE `webhook_endpoints` ADD `rate_limit` integer;--> statement-breakpoint
ALTER TABLE `webhook_endpoints` ADD `slowed_until` integer;