-- Sub-cent unit prices (issue 21): a fixed plan may be priced by unit_amount_decimal, an exact
-- decimal of the currency's minor unit with up to 12 decimals ("0.35" is 0.35 cent), instead of
-- price. Its unit_amount is then NULL. A tier's unit_amount_decimal lives in the tiers JSON.
ALTER TABLE plans ADD COLUMN unit_amount_decimal TEXT;
