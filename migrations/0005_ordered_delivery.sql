ALTER TABLE `webhook_deliveries` ADD `waiting_for` text;--> statement-breakpoint
ALTER TABLE `webhook_endpoints` ADD `ordering` text DEFAULT 'none' NOT NULL;