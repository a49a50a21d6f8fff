// npm run admin -- config-check: what each process needs in production (shared/config-processes.ts), and which of it
// is missing or malformed in this environment. Names and problems only, never a value.
import { ConfigError, loadConfig } from '../config.js';
import { checkSettings, needsOf, PROCESSES, SETTINGS, type ProcessName, type SettingReport } from '../config-processes.js';
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
  return { process: name, ok: settings.every((s) => s.state === 'ok') && bootError === null, settings, boot_error: bootError };
}

export function configCheck(env: NodeJS.ProcessEnv, choice: string): ProcessReport[] {
  if (!(CHOICES as readonly string[]).includes(choice)) throw new AdminError(`--process must be one of ${CHOICES.join(', ')}`);
  if (choice === 'all') return [...PROCESSES.map((p) => reportFor(env, p, [p])), reportFor(env, 'worker', POOLS)];
  return [reportFor(env, choice, choice === 'worker' ? POOLS : [choice as ProcessName])];
}

export function configCheckText(reports: ProcessReport[]): string {
  const width = Math.max(...reports.flatMap((r) => r.settings.map((s) => s.name.length)));
  return reports.map((r) => {
    const bad = r.settings.filter((s) => s.state !== 'ok').length;
    const head = `${r.process}: ${r.ok ? 'ready' : bad ? `${bad} of ${r.settings.length} variables missing or malformed` : 'would not boot'}`;
    const lines = r.settings.map((s) => `  ${s.state.padEnd(9)} ${s.name.padEnd(width)}  ${s.state === 'malformed' ? s.problem : s.about}`);
    return [head, ...lines, ...(r.boot_error ? [`  also: ${r.boot_error}`] : [])].join('\n');
  }).join('\n\n');
}
