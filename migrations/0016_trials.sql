-- Trials (issue 21): a plan's trial_period_days; a subscription's trial (status trialing, trial_start,
-- trial_end, when subscription_trial_will_end is due and whether it was sent).
ALTER TABLE `plans` ADD `trial_period_days` integer;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `trial_start` text;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `trial_end` text;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `trial_will_end_at` integer;--> statement-breakpoint
ALTER TABLE `subscriptions` ADD `trial_will_end_sent` integer DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX `subscriptions_trial_notice` ON `subscriptions` (`status`,`trial_will_end_sent`,`trial_will_end_at`);