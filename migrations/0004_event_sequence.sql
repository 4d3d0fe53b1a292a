ALTER TABLE `events` ADD `object_id` text;--> statement-breakpoint
ALTER TABLE `events` ADD `sequence` integer;--> statement-breakpoint
CREATE UNIQUE INDEX `events_object_sequence` ON `events` (`object_id`,`sequence`);