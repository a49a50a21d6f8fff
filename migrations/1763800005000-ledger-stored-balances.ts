import type { MigrationInterface, QueryRunner } from 'typeorm';

// Only the posting trigger moves an account's balance and version, so balance == sum(postings) holds by construction and a debit locks one row instead of summing history.
export class LedgerStoredBalances1763800005000 implements MigrationInterface {
  name = 'LedgerStoredBalances1763800005000';

  async up(q: QueryRunner): Promise<void> {
    // No posting may land between the backfill and the trigger that keeps the balance from then on.
    await q.query(`LOCK TABLE ledger_accounts IN ACCESS EXCLUSIVE MODE`);
    await q.query(`LOCK TABLE ledger_postings IN SHARE MODE`);
    await q.query(`DROP TRIGGER ledger_accounts_append_only ON ledger_accounts`);
    await q.query(`ALTER TABLE ledger_accounts ADD COLUMN balance numeric NOT NULL DEFAULT 0, ADD COLUMN version bigint NOT NULL DEFAULT 0`);
    await q.query(`
      UPDATE ledger_accounts a SET balance = s.total, version = s.postings
        FROM (SELECT account_id, sum(amount) AS total, count(*) AS postings FROM ledger_postings GROUP BY account_id) s
       WHERE a.id = s.account_id`);

    await q.query(`
      CREATE FUNCTION ledger_posting_apply() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE ledger_accounts SET balance = balance + NEW.amount, version = version + 1 WHERE id = NEW.account_id;
        RETURN NULL;
      END $$`);
    await q.query(`CREATE TRIGGER ledger_postings_apply AFTER INSERT ON ledger_postings FOR EACH ROW EXECUTE FUNCTION ledger_posting_apply()`);

    // An account starts at zero, keeps its identity, and moves its balance only from inside the posting trigger
    // (trigger depth 2), one posting (one version) at a time.
    await q.query(`
      CREATE FUNCTION ledger_account_guard() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          IF NEW.balance <> 0 OR NEW.version <> 0 THEN
            RAISE EXCEPTION 'ledger account % must start at balance 0, version 0: balances come only from postings', NEW.account_key
              USING ERRCODE = '23514';
          END IF;
          RETURN NEW;
        END IF;
        IF TG_OP = 'DELETE' OR (to_jsonb(NEW) - 'balance' - 'version') IS DISTINCT FROM (to_jsonb(OLD) - 'balance' - 'version') THEN
          RAISE EXCEPTION '% rows are append-only', TG_TABLE_NAME;
        END IF;
        IF (NEW.balance, NEW.version) IS DISTINCT FROM (OLD.balance, OLD.version)
           AND (pg_trigger_depth() < 2 OR NEW.version <> OLD.version + 1) THEN
          RAISE EXCEPTION 'the balance of ledger account % changes only through postings', OLD.account_key USING ERRCODE = '23514';
        END IF;
        RETURN NEW;
      END $$`);
    await q.query(`CREATE TRIGGER ledger_accounts_guard BEFORE INSERT OR UPDATE OR DELETE ON ledger_accounts FOR EACH ROW EXECUTE FUNCTION ledger_account_guard()`);
    await q.query(`CREATE TRIGGER ledger_accounts_no_truncate BEFORE TRUNCATE ON ledger_accounts FOR EACH STATEMENT EXECUTE FUNCTION forbid_mutation()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER ledger_accounts_no_truncate ON ledger_accounts`);
    await q.query(`DROP TRIGGER ledger_accounts_guard ON ledger_accounts`);
    await q.query(`DROP FUNCTION ledger_account_guard()`);
    await q.query(`DROP TRIGGER ledger_postings_apply ON ledger_postings`);
    await q.query(`DROP FUNCTION ledger_posting_apply()`);
    await q.query(`ALTER TABLE ledger_accounts DROP COLUMN balance, DROP COLUMN version`);
    await q.query(`CREATE TRIGGER ledger_accounts_append_only BEFORE UPDATE OR DELETE ON ledger_accounts FOR EACH ROW EXECUTE FUNCTION forbid_mutation()`);
  }
}
