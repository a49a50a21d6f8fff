import type { MigrationInterface, QueryRunner } from 'typeorm';

// A business's clearing, fee and faucet accounts take a posting from nearly every transaction: one stored balance
// row would serialize them all on its lock. Those accounts (no overdraft guard) keep their balance in 16 stripes;
// each database transaction adds to one stripe (by its id), so concurrent ones rarely meet. Guarded accounts
// (wallets, treasury) keep the single row, locked and checked. The posting trigger is still the only writer.
export class LedgerBalanceStripes1763800011000 implements MigrationInterface {
  name = 'LedgerBalanceStripes1763800011000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`LOCK TABLE ledger_accounts IN ACCESS EXCLUSIVE MODE`);
    await q.query(`LOCK TABLE ledger_postings IN SHARE MODE`);
    await q.query(`ALTER TABLE ledger_accounts ADD COLUMN striped boolean NOT NULL DEFAULT false`);
    await q.query(`
      CREATE TABLE ledger_balance_stripes (
        account_id uuid NOT NULL REFERENCES ledger_accounts(id),
        stripe smallint NOT NULL CHECK (stripe BETWEEN 0 AND 15),
        balance numeric NOT NULL,
        version bigint NOT NULL CHECK (version > 0),
        PRIMARY KEY (account_id, stripe)
      )`);
    // Existing balances of the striped kinds move to stripe 0 (the guard is off only for this move).
    await q.query(`ALTER TABLE ledger_accounts DISABLE TRIGGER ledger_accounts_guard`);
    await q.query(`
      INSERT INTO ledger_balance_stripes (account_id, stripe, balance, version)
      SELECT id, 0, balance, version FROM ledger_accounts
       WHERE kind IN ('settlement_clearing', 'provider_clearing', 'platform_fees', 'sandbox_faucet') AND version > 0`);
    await q.query(`
      UPDATE ledger_accounts SET striped = true, balance = 0, version = 0
       WHERE kind IN ('settlement_clearing', 'provider_clearing', 'platform_fees', 'sandbox_faucet')`);
    await q.query(`ALTER TABLE ledger_accounts ENABLE TRIGGER ledger_accounts_guard`);

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
    // Stripes change only inside the posting trigger (trigger depth 2), and are never removed.
    await q.query(`
      CREATE FUNCTION ledger_stripe_guard() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'DELETE' OR pg_trigger_depth() < 2 THEN
          RAISE EXCEPTION 'the balance stripes of ledger accounts change only through postings' USING ERRCODE = '23514';
        END IF;
        RETURN NEW;
      END $$`);
    await q.query(`CREATE TRIGGER ledger_balance_stripes_guard BEFORE INSERT OR UPDATE OR DELETE ON ledger_balance_stripes FOR EACH ROW EXECUTE FUNCTION ledger_stripe_guard()`);
    await q.query(`CREATE TRIGGER ledger_balance_stripes_no_truncate BEFORE TRUNCATE ON ledger_balance_stripes FOR EACH STATEMENT EXECUTE FUNCTION forbid_mutation()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ledger_accounts DISABLE TRIGGER ledger_accounts_guard`);
    await q.query(`
      UPDATE ledger_accounts a SET balance = s.balance, version = s.version
        FROM (SELECT account_id, sum(balance) AS balance, sum(version) AS version FROM ledger_balance_stripes GROUP BY account_id) s WHERE s.account_id = a.id`);
    await q.query(`ALTER TABLE ledger_accounts ENABLE TRIGGER ledger_accounts_guard`);
    await q.query(`DROP TABLE ledger_balance_stripes`);
    await q.query(`DROP FUNCTION ledger_stripe_guard()`);
    await q.query(`
      CREATE OR REPLACE FUNCTION ledger_posting_apply() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE ledger_accounts SET balance = balance + NEW.amount, version = version + 1 WHERE id = NEW.account_id;
        RETURN NULL;
      END $$`);
    await q.query(`ALTER TABLE ledger_accounts DROP COLUMN striped`);
  }
}
