// npm run admin -- config-check: what each process needs in production (shared/config-processes.ts), and which of it
// is missing or malformed in this environment. Names and problems only, never a value.
import { ConfigError, loadConfig } from '../config.js';
import { checkSettings, needsOf, PROCESSES, SETTINGS, type ProcessName, type SettingReport } from '../config-processes.js';
import { databaseConfig } from '../config-database.js';
import { formationConnections, poolSizeFor } from '../db/pool-sizes.js';
import { AdminError } from './commands.js';

/** `worker` is the Procfile's every-pool process; `all` checks each process of the Procfile in turn. */
const CHOICES = [...PROCESSES, 'worker', 'all'] as const;
const POOLS: ProcessName[] = ['pricing', 'settlement', 'providers', 'sandbox', 'webhooks'];

export interface ProcessReport {
  process: string;
  ok: boolean;
  settings: (SettingReport & { about: string })[];
  /** With every needed variable usable: what else would stop it booting (another variable malformed), or null. */
  boot_error: string | null;
  /** Its PostgreSQL pool (DATABASE_POOL_SIZE or its default); null for the release phase, which connects for a moment. */
  database_pool: number | null;
}

/** What a formation of dynos asks of the connection pooler (docs/pooler.md): per process type and in all. */
export interface FormationReport {
  formation: Record<string, number>;
  connections: Record<string, number>;
  total: number;
}

/** DATABASE_POOL_SIZE as configured, or null (unset, or malformed: the settings above say so). */
function configuredPool(env: NodeJS.ProcessEnv): number | null {
  try {
    return databaseConfig(env).databasePoolSize;
  } catch (err) {
    if (err instanceof ConfigError) return null;
    throw err;
  }
}

function reportFor(env: NodeJS.ProcessEnv, name: string, processes: ProcessName[]): ProcessReport {
  const needs = needsOf(processes);
  const settings = checkSettings(env, needs).map((r) => ({ ...r, about: SETTINGS[r.name].about }));
  let bootError: string | null = null;
  if (settings.every((s) => s.state === 'ok')) {
    try {
      loadConfig(env, { needs, walletSeeds: processes.includes('settlement'), who: `the ${name} process` });
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      bootError = err.message;
    }
  }
  const pool = name === 'release' ? null : poolSizeFor(name === 'web' ? 'web' : (processes as string[] as never), configuredPool(env));
  return { process: name, ok: settings.every((s) => s.state === 'ok') && bootError === null, settings, boot_error: bootError, database_pool: pool };
}

export function configCheck(env: NodeJS.ProcessEnv, choice: string): ProcessReport[] {
  if (!(CHOICES as readonly string[]).includes(choice)) throw new AdminError(`--process must be one of ${CHOICES.join(', ')}`);
  if (choice === 'all') return [...PROCESSES.map((p) => reportFor(env, p, [p])), reportFor(env, 'worker', POOLS)];
  return [reportFor(env, choice, choice === 'worker' ? POOLS : [choice as ProcessName])];
}

/**
 * `--formation web=2,pricing=2,...`: the dynos of each Procfile process; by default the Procfile's own scale, two web
 * dynos and two of each pool (docs/pooler.md's example).
 */
export function formationCheck(env: NodeJS.ProcessEnv, raw: string | undefined): FormationReport {
  const formation: Record<string, number> = {};
  if (raw) {
    for (const part of raw.split(',').map((p) => p.trim()).filter(Boolean)) {
      const m = /^([a-z]+)=(\d{1,4})$/.exec(part);
      if (!m) throw new AdminError('--formation is process=dynos pairs, e.g. web=2,pricing=2,settlement=2');
      formation[m[1]] = Number(m[2]);
    }
  } else {
    formation.web = 2;
    for (const pool of POOLS) formation[pool] = 2;
  }
  try {
    const { byProcess, total } = formationConnections(formation, { databasePoolSize: configuredPool(env) });
    return { formation, connections: byProcess, total };
  } catch (err) {
    throw new AdminError(err instanceof Error ? err.message : String(err));
  }
}

export function formationText(f: FormationReport): string {
  const parts = Object.entries(f.connections).map(([name, n]) => `${name} ${f.formation[name]} x ${n / Math.max(f.formation[name], 1)} = ${n}`);
  return `database connections for this formation: ${parts.join(', ')}; ${f.total} in all (keep it within the pooler's client limit: docs/pooler.md)`;
}

export function configCheckText(reports: ProcessReport[]): string {
  const width = Math.max(...reports.flatMap((r) => r.settings.map((s) => s.name.length)));
  return reports.map((r) => {
    const bad = r.settings.filter((s) => s.state !== 'ok').length;
    const pool = r.database_pool === null ? '' : ` (database pool ${r.database_pool})`;
    const head = `${r.process}: ${r.ok ? 'ready' : bad ? `${bad} of ${r.settings.length} variables missing or malformed` : 'would not boot'}${pool}`;
    const lines = r.settings.map((s) => `  ${s.state.padEnd(9)} ${s.name.padEnd(width)}  ${s.state === 'malformed' ? s.problem : s.about}`);
    return [head, ...lines, ...(r.boot_error ? [`  also: ${r.boot_error}`] : [])].join('\n');
  }).join('\n\n');
}
