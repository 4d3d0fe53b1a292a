ALTER TABLE `webhook_endpoints` ADD `disabled_at` text;--> statement-breakpoint
ALTER TABLE `webhook_endpoints` ADD `failing_since` integer;--> statement-breakpoint
-- Hand-written: disabled_reason becomes a code ("gone" for a 410, else "manual"), and a disabled
-- endpoint's disabled_at is taken from its last change (the best record there is of it).
UPDATE `webhook_endpoints` SET `disabled_reason` = CASE WHEN `disabled_reason` LIKE '%410%' THEN 'gone' ELSE 'manual' END, `disabled_at` = `updated_at` WHERE `status` = 'disabled';--> statement-breakpoint
UPDATE `webhook_endpoints` SET `disabled_reason` = NULL WHERE `status` = 'active';
