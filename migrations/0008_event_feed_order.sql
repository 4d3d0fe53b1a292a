-- Each event's place in its account's feed (events.feed_position), taken by the event's INSERT
-- when it commits; GET /api/events orders and pages by it instead of by id. The table is rebuilt
-- so that the column is NOT NULL. Events already written get their places in id order, per account.
CREATE TABLE `__new_events` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`object_id` text,
	`sequence` integer,
	`feed_position` integer NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_events` (`id`, `account_id`, `type`, `payload`, `object_id`, `sequence`, `feed_position`, `created_at`)
SELECT `id`, `account_id`, `type`, `payload`, `object_id`, `sequence`, ROW_NUMBER() OVER (PARTITION BY `account_id` ORDER BY `id`), `created_at` FROM `events`;
--> statement-breakpoint
DROP TABLE `events`;--> statement-breakpoint
ALTER TABLE `__new_events` RENAME TO `events`;--> statement-breakpoint
CREATE UNIQUE INDEX `events_account_feed` ON `events` (`account_id`,`feed_position`);--> statement-breakpoint
CREATE INDEX `events_account_type_feed` ON `events` (`account_id`,`type`,`feed_position`);--> statement-breakpoint
CREATE UNIQUE INDEX `events_object_sequence` ON `events` (`object_id`,`sequence`);
