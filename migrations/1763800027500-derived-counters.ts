import type { MigrationInterface, QueryRunner } from 'typeorm';

// Counters the engine keeps beside the facts they sum are tied to those facts by the database (issue: counters kept
// by hand in several places drift apart). Each is checked when its transaction commits (deferred constraint
// triggers), whichever code path wrote it:
// - settlements.received_amount = the sum of its settlement_transfers (a reorg deletes the transfers it removed).
// - payment_intents.received_amount = what its deposits count toward the intent: every deposit that is not late and
//   not failed (a mobile-money payment of the whole amount counts as usdc_amount; anything else as its usdc_amount).
// - payment_intents.confirmed_amount = the same over its confirmed deposits.
// A unit that breaks one fails at commit with 23514 (check_violation), naming the row and both sums; nothing of it is
// written.
/** The deferred check of a settlement's received_amount (its first form; 1764700000000 reads it in one statement). */
export const SETTLEMENT_RECEIVED_MATCHES_TRANSFERS = `
      CREATE FUNCTION settlement_received_matches_transfers() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        sid uuid;
        stored numeric;
        summed numeric;
      BEGIN
        IF TG_TABLE_NAME = 'settlements' THEN sid := NEW.id;
        ELSIF TG_OP = 'DELETE' THEN sid := OLD.settlement_id;
        ELSE sid := NEW.settlement_id;
        END IF;
        SELECT received_amount INTO stored FROM settlements WHERE id = sid;
        IF NOT FOUND THEN RETURN NULL; END IF;
        SELECT coalesce(sum(amount), 0) INTO summed FROM settlement_transfers WHERE settlement_id = sid;
        IF stored <> summed THEN
          RAISE EXCEPTION 'settlement % holds received_amount %, its transfers sum to %', sid, stored, summed USING ERRCODE = 'check_violation';
        END IF;
        RETURN NULL;
      END $$`;

export class DerivedCounters1763800027500 implements MigrationInterface {
  name = 'DerivedCounters1763800027500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(SETTLEMENT_RECEIVED_MATCHES_TRANSFERS);
    await q.query(`CREATE CONSTRAINT TRIGGER settlement_received_from_transfers AFTER INSERT OR UPDATE OR DELETE ON settlement_transfers
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION settlement_received_matches_transfers()`);
    await q.query(`CREATE CONSTRAINT TRIGGER settlement_received_stored AFTER INSERT OR UPDATE OF received_amount ON settlements
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION settlement_received_matches_transfers()`);

    await q.query(`
      CREATE FUNCTION intent_amounts_match_deposits() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        iid uuid;
        intent record;
        received numeric;
        confirmed numeric;
      BEGIN
        IF TG_TABLE_NAME = 'payment_intents' THEN iid := NEW.id;
        ELSIF TG_OP = 'DELETE' THEN iid := OLD.payment_intent_id;
        ELSE iid := NEW.payment_intent_id;
        END IF;
        SELECT id, amount, usdc_amount, received_amount, confirmed_amount INTO intent FROM payment_intents WHERE id = iid;
        IF NOT FOUND THEN RETURN NULL; END IF;
        SELECT coalesce(sum(toward), 0), coalesce(sum(toward) FILTER (WHERE status = 'confirmed'), 0) INTO received, confirmed
          FROM (SELECT d.status, CASE WHEN d.payment_method = 'mobile_money' AND d.amount >= intent.amount THEN intent.usdc_amount ELSE d.usdc_amount END AS toward
                  FROM treasury_deposits d WHERE d.payment_intent_id = iid AND NOT d.late_payment AND d.status <> 'failed') counted;
        IF intent.received_amount <> received OR intent.confirmed_amount <> confirmed THEN
          RAISE EXCEPTION 'payment intent % holds received % and confirmed %, its deposits count % and %', iid, intent.received_amount, intent.confirmed_amount, received, confirmed
            USING ERRCODE = 'check_violation';
        END IF;
        RETURN NULL;
      END $$`);
    await q.query(`CREATE CONSTRAINT TRIGGER intent_amounts_from_deposits AFTER INSERT OR UPDATE OR DELETE ON treasury_deposits
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION intent_amounts_match_deposits()`);
    await q.query(`CREATE CONSTRAINT TRIGGER intent_amounts_stored AFTER INSERT OR UPDATE OF received_amount, confirmed_amount ON payment_intents
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION intent_amounts_match_deposits()`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TRIGGER intent_amounts_stored ON payment_intents`);
    await q.query(`DROP TRIGGER intent_amounts_from_deposits ON treasury_deposits`);
    await q.query(`DROP FUNCTION intent_amounts_match_deposits()`);
    await q.query(`DROP TRIGGER settlement_received_stored ON settlements`);
    await q.query(`DROP TRIGGER settlement_received_from_transfers ON settlement_transfers`);
    await q.query(`DROP FUNCTION settlement_received_matches_transfers()`);
  }
}
