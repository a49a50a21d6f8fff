import type { EntityManager } from 'typeorm';
import type { Environment } from './chains.js';
import type { EventType } from './machines.js';

export interface EventScope {
  businessId: string;
  environment: Environment;
}

/** Writes an event row in the caller's transaction: `{ type, data: <resource snapshot> }`. */
export async function recordEvent(em: EntityManager, scope: EventScope, type: EventType, data: Record<string, unknown>): Promise<string> {
  const rows: { id: string }[] = await em.query(
    `INSERT INTO events (business_id, environment, type, data) VALUES ($1, $2, $3, $4) RETURNING id`,
    [scope.businessId, scope.environment, type, JSON.stringify(data)],
  );
  return rows[0].id;
}
