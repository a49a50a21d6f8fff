// The watcher's per-chain cursor, moved back by whoever finds that a reorg removed blocks it had read (the
// confirmation checks of settlements and deposits), apart from the scanner that reads and advances it.
import type { EntityManager } from 'typeorm';
import type { Chain, Environment } from '../domain/chains.js';

/** A reorg removed a block at or after `block`: the cursor goes back to it (never forward), so the new chain is read again. */
export async function rewindCursor(q: Pick<EntityManager, 'query'>, environment: Environment, chain: Chain, block: bigint | string): Promise<void> {
  await q.query(`UPDATE chain_cursors SET next_block = LEAST(next_block, $3), updated_at = now() WHERE environment = $1 AND chain = $2`, [environment, chain, block.toString()]);
}
