import { inUnit } from '../../shared/db/unit-of-work.js';
import { applyProviderResult } from '../../shared/domain/provider-results.js';
import { parseDarajaCallback, type DarajaCallbackKind } from '../../shared/providers/daraja/callbacks.js';
import { defineJob } from '../job-definition.js';

/**
 * A callback the web process stored (raw, once per body) is applied here: parsed, matched to its transaction or
 * payment intent, and moved by a conditional transition in the same unit that marks the callback processed.
 */
export const applyCallbackJob = defineJob({
  name: 'provider.callback',
  async process(job, deps) {
    return inUnit(deps, async (unit) => {
      const rows: { kind: DarajaCallbackKind; body: unknown; processed_at: Date | null }[] = await unit.em.query(
        `SELECT kind, body, processed_at FROM provider_callbacks WHERE id = $1 FOR UPDATE`, [job.data.callbackId],
      );
      const row = rows[0];
      if (!row || row.processed_at) return 'already applied';
      const parsed = parseDarajaCallback(row.kind, row.body);
      // Not a shape we read: kept as received for operators (result `unparsed`), never retried.
      const result = parsed ? await applyProviderResult(unit, deps.config, parsed) : 'unparsed';
      await unit.em.query(`UPDATE provider_callbacks SET processed_at = now(), result = $2 WHERE id = $1`, [job.data.callbackId, result]);
      return result;
    });
  },
  // Still matching nothing of ours after every retry (forged with a valid token, or for another system): kept, marked.
  async onFinalFailure(job, _err, deps) {
    await deps.ds.query(`UPDATE provider_callbacks SET processed_at = now(), result = 'unmatched' WHERE id = $1 AND processed_at IS NULL`, [job.data.callbackId]);
  },
});
