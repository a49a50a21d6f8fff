import type { MigrationInterface, QueryRunner } from 'typeorm';

// A customer's answer embeds its managed wallet, so a change to that wallet is a change to the customer: an update of
// a managed wallet (or its removal) moves its customer's updated_at in the same transaction. The customer's row
// version (shared/db/row-version.ts) then names the pair, and a page of customers finds which rows it has already
// rendered from the customers alone (api/rendered.ts), without looking up 25 wallets. A managed wallet is written in
// its customer's own creating statement, and the service never updates one (it cannot be archived on its own), so
// this runs only for changes made outside the service's code. What skips row triggers (a session with
// session_replication_role = replica, as logical replication's apply and pg_restore --disable-triggers run, or a
// trigger disabled by hand) leaves a customer's version as it was: a web process may then show its earlier wallet
// for up to ten minutes, or until the customer changes.
export class CustomerVersionCoversWallet1764900000000 implements MigrationInterface {
  name = 'CustomerVersionCoversWallet1764900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION managed_wallet_moves_customer() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE customers SET updated_at = now() WHERE id IN (OLD.customer_id, CASE WHEN TG_OP = 'UPDATE' THEN NEW.customer_id END);
        RETURN NULL;
      END $$`);
    await q.query(`
      CREATE TRIGGER wallets_managed_moves_customer AFTER UPDATE OR DELETE ON wallets
        FOR EACH ROW WHEN (OLD.type = 'managed_wallet') EXECUTE FUNCTION managed_wallet_moves_customer()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER wallets_managed_moves_customer ON wallets`);
    await q.query(`DROP FUNCTION managed_wallet_moves_customer()`);
  }
}
