-- Issue 21, phase A: invoices. Every subscription charge is for an invoice with lines
-- (src/billing/invoices.ts); a payment names its invoice.
--
-- invoices: unique per (subscription, period), so a dunning retry charges the same invoice;
-- `number_sequence` is gap-free per account and mode (taken as MAX + 1 by the statement that
-- finalizes the invoice; the unique index proves no two share one), and `number` is derived from
-- it: the last 8 characters of the account id, upper-cased, a dash, the sequence on 4 digits.
-- invoice_lines: an invoice's lines in order, read through their invoice.
--
-- History: every payment made before this migration gets its invoice here, so that it is
-- complete. A billing period that was charged (the first charge of a subscription, a renewal and
-- its dunning retries, a past-due card update) is one invoice with one line, the period's, named
-- by every payment attempted for it: paid, open (still being dunned) or uncollectible, as the
-- period is. A payment that charged no period (a declined first charge, which created no
-- subscription) is an invoice of its own with one line: paid when the payment succeeded, else
-- void, as a declined first charge's invoice is today. Numbers follow the order of each invoice's
-- first payment, per account and mode.
CREATE TABLE `invoices` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`number_sequence` integer,
	`number` text GENERATED ALWAYS AS (CASE WHEN number_sequence IS NULL THEN NULL ELSE upper(substr(account_id, -8)) || '-' || printf('%04d', number_sequence) END) VIRTUAL,
	`status` text NOT NULL,
	`subscription_id` text,
	`period_index` integer,
	`user_id` text,
	`currency` text NOT NULL,
	`period_start` text NOT NULL,
	`period_end` text NOT NULL,
	`subtotal` integer NOT NULL,
	`discount` integer DEFAULT 0 NOT NULL,
	`total` integer NOT NULL,
	`amount_paid` integer DEFAULT 0 NOT NULL,
	`amount_due` integer NOT NULL,
	`payment_id` text,
	`created_at` text NOT NULL,
	`finalized_at` text,
	`paid_at` text,
	`voided_at` text,
	`updated_at` text NOT NULL,
	CONSTRAINT "invoices_total" CHECK("invoices"."total" = "invoices"."subtotal" - "invoices"."discount" AND "invoices"."discount" >= 0 AND "invoices"."amount_due" >= 0 AND "invoices"."amount_paid" >= 0)
);
--> statement-breakpoint
CREATE UNIQUE INDEX `invoices_number` ON `invoices` (`account_id`,`livemode`,`number_sequence`);--> statement-breakpoint
CREATE UNIQUE INDEX `invoices_period` ON `invoices` (`subscription_id`,`period_index`);--> statement-breakpoint
CREATE INDEX `invoices_account` ON `invoices` (`account_id`,`livemode`,`id`);--> statement-breakpoint
CREATE INDEX `invoices_subscription` ON `invoices` (`account_id`,`livemode`,`subscription_id`,`id`);--> statement-breakpoint
CREATE INDEX `invoices_user` ON `invoices` (`account_id`,`livemode`,`user_id`,`id`);--> statement-breakpoint
CREATE INDEX `invoices_status` ON `invoices` (`account_id`,`livemode`,`status`,`id`);--> statement-breakpoint
CREATE TABLE `invoice_lines` (
	`id` text PRIMARY KEY NOT NULL,
	`invoice_id` text NOT NULL,
	`account_id` text NOT NULL,
	`livemode` integer DEFAULT false NOT NULL,
	`position` integer NOT NULL,
	`type` text NOT NULL,
	`description` text NOT NULL,
	`quantity` integer NOT NULL,
	`unit_amount_decimal` text,
	`amount` integer NOT NULL,
	`proration` integer DEFAULT false NOT NULL,
	`period_start` text NOT NULL,
	`period_end` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `invoice_lines_invoice` ON `invoice_lines` (`invoice_id`,`position`);--> statement-breakpoint
ALTER TABLE `payments` ADD `invoice_id` text;--> statement-breakpoint

-- The history. Scratch tables, dropped at the end.
-- 1. The billing period each payment was an attempt at: a paying payment is its period's
--    payment_id; every renewal, dunning retry and card update was sent with the reference
--    `<subscription>:period:<n>:attempt:<k>`.
CREATE TABLE `_invoice_payment_periods` AS
	SELECT pay.id AS payment_id, per.id AS period_id
	FROM payments AS pay JOIN subscription_periods AS per ON per.payment_id = pay.id
	UNION
	SELECT pay.id, per.id
	FROM payments AS pay JOIN subscription_periods AS per
		ON per.subscription_id = substr(pay.charge_reference, 1, instr(pay.charge_reference, ':period:') - 1)
		AND per.period_index = CAST(substr(pay.charge_reference, instr(pay.charge_reference, ':period:') + 8,
			instr(pay.charge_reference, ':attempt:') - instr(pay.charge_reference, ':period:') - 8) AS INTEGER)
	WHERE pay.charge_reference LIKE 'sub\_%:period:%:attempt:%' ESCAPE '\';
--> statement-breakpoint
-- 2. One invoice per charged period, one per payment that charged no period; each with the id
--    of its first payment, which orders the numbers.
CREATE TABLE `_invoice_sources` AS
	SELECT 'in_' || substr(per.id, 6) AS id, per.account_id AS account_id, per.livemode AS livemode,
		per.id AS period_id, NULL AS payment_id, MIN(pp.payment_id) AS first_payment, MAX(pp.payment_id) AS last_payment
	FROM subscription_periods AS per JOIN _invoice_payment_periods AS pp ON pp.period_id = per.id
	GROUP BY per.id
	UNION ALL
	SELECT 'in_' || substr(pay.id, 5), pay.account_id, pay.livemode, NULL, pay.id, pay.id, pay.id
	FROM payments AS pay
	WHERE pay.id NOT IN (SELECT payment_id FROM _invoice_payment_periods);
--> statement-breakpoint
CREATE TABLE `_invoice_numbers` AS
	SELECT id, ROW_NUMBER() OVER (PARTITION BY account_id, livemode ORDER BY first_payment, id) AS number_sequence
	FROM _invoice_sources;
--> statement-breakpoint
-- 3. The invoices of periods. A period ends where the next begins: the billing anchor plus n + 1
--    intervals, on the anchor's day clamped to the month's last day, at the anchor's time of day
--    (src/domain/billing-calendar.ts, in SQL). The line is the period's amount: the plan's unit
--    price times the quantity when they make it, else the period's amount as one unit.
INSERT INTO invoices (id, account_id, livemode, number_sequence, status, subscription_id, period_index, user_id, currency,
	period_start, period_end, subtotal, discount, total, amount_paid, amount_due, payment_id, created_at, finalized_at, paid_at, updated_at)
SELECT src.id, per.account_id, per.livemode, num.number_sequence,
	CASE per.status WHEN 'paid' THEN 'paid' WHEN 'open' THEN 'open' ELSE 'uncollectible' END,
	per.subscription_id, per.period_index, sub.user_id, per.currency, per.period_start,
	strftime('%Y-%m-%d',
		date(sub.billing_anchor, 'start of month', '+' || ((per.period_index + 1) * (CASE pl.interval WHEN 'year' THEN 12 ELSE 1 END)) || ' months'),
		'+' || (MIN(CAST(strftime('%d', sub.billing_anchor) AS INTEGER),
			CAST(strftime('%d', date(sub.billing_anchor, 'start of month', '+' || ((per.period_index + 1) * (CASE pl.interval WHEN 'year' THEN 12 ELSE 1 END)) || ' months'), '+1 month', '-1 day') AS INTEGER)) - 1) || ' days')
		|| 'T' || strftime('%H:%M:%f', sub.billing_anchor) || 'Z',
	per.amount, 0, per.amount, CASE WHEN per.status = 'paid' THEN per.amount ELSE 0 END, per.amount,
	COALESCE(per.payment_id, src.last_payment),
	first.created_at, first.created_at, CASE WHEN per.status = 'paid' THEN paying.created_at END, first.created_at
FROM _invoice_sources AS src
	JOIN _invoice_numbers AS num ON num.id = src.id
	JOIN subscription_periods AS per ON per.id = src.period_id
	JOIN subscriptions AS sub ON sub.id = per.subscription_id
	JOIN plans AS pl ON pl.id = sub.plan_id
	JOIN payments AS first ON first.id = src.first_payment
	LEFT JOIN payments AS paying ON paying.id = per.payment_id;
--> statement-breakpoint
INSERT INTO invoice_lines (id, invoice_id, account_id, livemode, position, type, description, quantity, unit_amount_decimal, amount, proration, period_start, period_end)
SELECT 'il_' || substr(inv.id, 4), inv.id, inv.account_id, inv.livemode, 0, 'subscription',
	CASE WHEN pl.pricing_model = 'fixed' AND pl.unit_amount * sub.quantity = inv.subtotal THEN sub.quantity ELSE 1 END || ' × ' || pl.name,
	CASE WHEN pl.pricing_model = 'fixed' AND pl.unit_amount * sub.quantity = inv.subtotal THEN sub.quantity ELSE 1 END,
	CASE WHEN pl.pricing_model = 'fixed' AND pl.unit_amount * sub.quantity = inv.subtotal THEN CAST(pl.unit_amount AS TEXT) ELSE NULL END,
	inv.subtotal, 0, inv.period_start, inv.period_end
FROM invoices AS inv
	JOIN subscriptions AS sub ON sub.id = inv.subscription_id
	JOIN plans AS pl ON pl.id = sub.plan_id;
--> statement-breakpoint
-- 4. The invoices of payments that charged no period: the payment's own moment is the period.
INSERT INTO invoices (id, account_id, livemode, number_sequence, status, subscription_id, period_index, user_id, currency,
	period_start, period_end, subtotal, discount, total, amount_paid, amount_due, payment_id, created_at, finalized_at, paid_at, voided_at, updated_at)
SELECT src.id, pay.account_id, pay.livemode, num.number_sequence,
	CASE WHEN pay.status = 'failed' THEN 'void' ELSE 'paid' END,
	pay.subscription_id, NULL, pay.user_id, pay.currency, pay.created_at, pay.created_at,
	pay.amount, 0, pay.amount, CASE WHEN pay.status = 'failed' THEN 0 ELSE pay.amount END, pay.amount, pay.id,
	pay.created_at, pay.created_at, CASE WHEN pay.status = 'failed' THEN NULL ELSE pay.created_at END,
	CASE WHEN pay.status = 'failed' THEN pay.created_at END, pay.created_at
FROM _invoice_sources AS src
	JOIN _invoice_numbers AS num ON num.id = src.id
	JOIN payments AS pay ON pay.id = src.payment_id;
--> statement-breakpoint
INSERT INTO invoice_lines (id, invoice_id, account_id, livemode, position, type, description, quantity, unit_amount_decimal, amount, proration, period_start, period_end)
SELECT 'il_' || substr(inv.id, 4), inv.id, inv.account_id, inv.livemode, 0, 'subscription', 'Subscription charge', 1,
	CAST(inv.subtotal AS TEXT), inv.subtotal, 0, inv.period_start, inv.period_end
FROM invoices AS inv
WHERE inv.period_index IS NULL;
--> statement-breakpoint
-- 5. Every payment names its invoice.
UPDATE payments SET invoice_id = COALESCE(
	(SELECT 'in_' || substr(pp.period_id, 6) FROM _invoice_payment_periods AS pp WHERE pp.payment_id = payments.id),
	'in_' || substr(payments.id, 5));
--> statement-breakpoint
DROP TABLE `_invoice_numbers`;--> statement-breakpoint
DROP TABLE `_invoice_sources`;--> statement-breakpoint
DROP TABLE `_invoice_payment_periods`;
