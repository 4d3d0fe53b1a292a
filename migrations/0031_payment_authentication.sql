ALTER TABLE `payments` ADD `page_secret` text;--> statement-breakpoint
ALTER TABLE `payments` ADD `return_url` text;