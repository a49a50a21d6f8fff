import type { MigrationInterface, QueryRunner } from 'typeorm';

// A committed journal entry is closed: later transactions cannot add postings to it (a balanced pair would
// otherwise pass the commit-time check and silently change history). Ledger accounts keep their identity.
export class LedgerSealedEntries1763800003000 implements MigrationInterface {
  name = 'LedgerSealedEntries1763800003000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE journal_entries ADD COLUMN created_xid xid8 NOT NULL DEFAULT pg_current_xact_id()`);
    await q.query(`
      CREATE FUNCTION ledger_posting_same_transaction() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF (SELECT created_xid FROM journal_entries WHERE id = NEW.entry_id) IS DISTINCT FROM pg_current_xact_id() THEN
          RAISE EXCEPTION 'journal entry % is closed: postings are written in the transaction that creates the entry', NEW.entry_id
            USING ERRCODE = '23514';
        END IF;
        RETURN NEW;
      END $$`);
    await q.query(`
      CREATE TRIGGER ledger_postings_same_transaction BEFORE INSERT ON ledger_postings
      FOR EACH ROW EXECUTE FUNCTION ledger_posting_same_transaction()`);
    await q.query(`CREATE TRIGGER ledger_accounts_append_only BEFORE UPDATE OR DELETE ON ledger_accounts FOR EACH ROW EXECUTE FUNCTION forbid_mutation()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER ledger_accounts_append_only ON ledger_accounts`);
    await q.query(`DROP TRIGGER ledger_postings_same_transaction ON ledger_postings`);
    await q.query(`DROP FUNCTION ledger_posting_same_transaction()`);
    await q.query(`ALTER TABLE journal_entries DROP COLUMN created_xid`);
  }
}
