import type { MigrationInterface, QueryRunner } from 'typeorm';

// Two transactions that post to the same stripe of two striped accounts, in opposite orders, deadlock. A stripe was
// chosen by transaction id (one in 16), so busy transactions met often. Now a transaction claims a stripe of its
// business that no other running transaction holds (a transaction-scoped advisory lock, tried from its id onward),
// out of 64, and keeps it for every striped posting it makes; only with all 64 taken does it share one (and a rare
// deadlock is retried by the unit of work).
export class LedgerStripeClaims1763800013000 implements MigrationInterface {
  name = 'LedgerStripeClaims1763800013000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ledger_balance_stripes DROP CONSTRAINT IF EXISTS ledger_balance_stripes_stripe_check`);
    await q.query(`ALTER TABLE ledger_balance_stripes ADD CONSTRAINT ledger_balance_stripes_stripe_check CHECK (stripe BETWEEN 0 AND 63)`);
    await q.query(`
      CREATE OR REPLACE FUNCTION ledger_claimed_stripe(business uuid) RETURNS smallint LANGUAGE plpgsql AS $$
      DECLARE
        setting text := 'rampway.stripe_' || replace(business::text, '-', '');
        claimed text := current_setting(setting, true);
        base int := (pg_current_xact_id()::text::bigint % 64)::int;
        stripe int;
      BEGIN
        IF claimed IS NOT NULL AND claimed <> '' THEN
          RETURN claimed::smallint;
        END IF;
        FOR k IN 0..63 LOOP
          IF pg_try_advisory_xact_lock(hashtext(business::text), (base + k) % 64) THEN
            stripe := (base + k) % 64;
            EXIT;
          END IF;
        END LOOP;
        stripe := coalesce(stripe, base);
        PERFORM set_config(setting, stripe::text, true);
        RETURN stripe::smallint;
      END $$`);
    await q.query(`
      CREATE OR REPLACE FUNCTION ledger_posting_apply() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF (SELECT striped FROM ledger_accounts WHERE id = NEW.account_id) THEN
          INSERT INTO ledger_balance_stripes AS s (account_id, stripe, balance, version)
          VALUES (NEW.account_id, ledger_claimed_stripe(NEW.business_id), NEW.amount, 1)
          ON CONFLICT (account_id, stripe) DO UPDATE SET balance = s.balance + EXCLUDED.balance, version = s.version + 1;
        ELSE
          UPDATE ledger_accounts SET balance = balance + NEW.amount, version = version + 1 WHERE id = NEW.account_id;
        END IF;
        RETURN NULL;
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE OR REPLACE FUNCTION ledger_posting_apply() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF (SELECT striped FROM ledger_accounts WHERE id = NEW.account_id) THEN
          INSERT INTO ledger_balance_stripes AS s (account_id, stripe, balance, version)
          VALUES (NEW.account_id, (pg_current_xact_id()::text::bigint % 16)::smallint, NEW.amount, 1)
          ON CONFLICT (account_id, stripe) DO UPDATE SET balance = s.balance + EXCLUDED.balance, version = s.version + 1;
        ELSE
          UPDATE ledger_accounts SET balance = balance + NEW.amount, version = version + 1 WHERE id = NEW.account_id;
        END IF;
        RETURN NULL;
      END $$`);
    await q.query(`DROP FUNCTION ledger_claimed_stripe(uuid)`);
  }
}
