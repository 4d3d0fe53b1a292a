DROP INDEX `payments_capture_before`;--> statement-breakpoint
DROP INDEX `payments_subscription`;--> statement-breakpoint
CREATE INDEX `payments_capture_due` ON `payments` (`capture_before`,`id`) WHERE "payments"."status" = 'requires_capture';--> statement-breakpoint
CREATE INDEX `payments_action_waiting` ON `payments` (`created_at`,`id`) WHERE "payments"."status" = 'requires_action';--> statement-breakpoint
CREATE INDEX `payments_subscription` ON `payments` (`account_id`,`livemode`,`subscription_id`,`id`) WHERE "payments"."subscription_id" IS NOT NULL;