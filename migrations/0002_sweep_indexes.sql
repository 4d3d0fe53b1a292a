CREATE INDEX `payouts_status` ON `payouts` (`status`,`created_at`);--> statement-breakpoint
CREATE INDEX `refunds_status` ON `refunds` (`status`,`created_at`);--> statement-breakpoint
CREATE INDEX `users_test_clock` ON `users` (`test_clock_id`);