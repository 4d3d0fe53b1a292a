ALTER TABLE `job_runs` ADD `lease_until` integer;--> statement-breakpoint
ALTER TABLE `job_runs` ADD `expires_at` integer;--> statement-breakpoint
CREATE INDEX `job_runs_expiry` ON `job_runs` (`expires_at`);--> statement-breakpoint
ALTER TABLE `payments` ADD `charge_reference` text;--> statement-breakpoint
CREATE UNIQUE INDEX `payments_charge_reference` ON `payments` (`charge_reference`);--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `lease_until` integer;