-- Issue 19: a past-due card update vaults the new card before it claims the period, and keeps the
-- token (with the card's summary and fingerprint, never the PAN) on the claim, so the cron can
-- settle a claim whose outcome is unknown by sending the same reference with the same token,
-- whether or not the subscription is due. The index serves that cron's look-up of stale claims.
ALTER TABLE `subscription_periods` ADD `claim_card` text;--> statement-breakpoint
CREATE INDEX `subscription_periods_status` ON `subscription_periods` (`status`,`updated_at`);
