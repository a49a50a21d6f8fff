// Each process's PostgreSQL pool, and what a formation of dynos asks of a connection pooler (docs/pooler.md).
import { POOLS, type Pool } from '../queues/registry.js';
import type { Config } from '../config.js';

/**
 * Defaults that fit PgBouncer's default client limit (max_client_conn = 100) with room to spare: the web process 10,
 * a worker process 5 for each pool it runs, at most 10. The Procfile's formation of two web dynos and two dynos of
 * each pool asks for 2 x 10 + 5 x 2 x 5 = 70 client connections.
 */
export const POOL_SIZE_DEFAULTS = { web: 10, perWorkerPool: 5, workerMax: 10 } as const;

/** The processes of the Procfile that connect to the database: the web process, or the pools a worker process runs. */
export const PROCFILE_PROCESSES: Record<string, 'web' | readonly Pool[]> = {
  web: 'web',
  worker: POOLS,
  ...Object.fromEntries(POOLS.map((pool) => [pool, [pool]])),
};

/** The pool of a process: DATABASE_POOL_SIZE when set, else its default. */
export function poolSizeFor(process: 'web' | readonly Pool[], configured: Config['databasePoolSize']): number {
  if (configured !== null) return configured;
  if (process === 'web') return POOL_SIZE_DEFAULTS.web;
  return Math.min(POOL_SIZE_DEFAULTS.perWorkerPool * Math.max(process.length, 1), POOL_SIZE_DEFAULTS.workerMax);
}

/** Each Procfile process's pool (the release phase and admin commands connect directly, 2 each, for a moment). */
export function databasePoolSizes(config: Pick<Config, 'databasePoolSize'>): Record<string, number> {
  return Object.fromEntries(Object.entries(PROCFILE_PROCESSES).map(([name, process]) => [name, poolSizeFor(process, config.databasePoolSize)]));
}

/**
 * What a formation (dynos per Procfile process, e.g. { web: 2, pricing: 2 }) asks of the pooler: the client
 * connections of each process type (dynos x pool) and their total, to be kept at or under the pooler's client limit.
 */
export function formationConnections(formation: Record<string, number>, config: Pick<Config, 'databasePoolSize'>): { byProcess: Record<string, number>; total: number } {
  const sizes = databasePoolSizes(config);
  const byProcess: Record<string, number> = {};
  for (const [name, dynos] of Object.entries(formation)) {
    if (!(name in sizes)) throw new Error(`${name} is not a Procfile process that connects to the database (${Object.keys(sizes).join(', ')})`);
    byProcess[name] = dynos * sizes[name];
  }
  return { byProcess, total: Object.values(byProcess).reduce((a, b) => a + b, 0) };
}
