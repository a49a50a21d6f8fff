// A benchmark's second target: the service as it was at another revision, run beside this checkout's in the same
// run, so a change is measured against the code before it under the same load on the machine (BENCH_BASELINE=<rev>).
// The revision is checked out once as a detached git worktree under the system's temporary directory, sharing this
// checkout's node_modules; it migrates its own database and runs its own processes, with its own entry points.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

/** The directory holding `rev` (a commit, branch or tag), checked out on first use. */
export function checkoutRevision(rev: string): string {
  const commit = execFileSync('git', ['rev-parse', '--verify', `${rev}^{commit}`], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dir = path.join(os.tmpdir(), `rampway-bench-${commit.slice(0, 12)}`);
  if (!existsSync(path.join(dir, 'package.json'))) {
    execFileSync('git', ['worktree', 'add', '--force', '--detach', dir, commit], { cwd: ROOT, stdio: 'ignore' });
  }
  if (!existsSync(path.join(dir, 'node_modules'))) symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

/** Runs a script of the checkout in `cwd` to its end (its migrations, an admin command); answers its stdout. */
export function runScript(cwd: string, script: string, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.stderr.on('data', (d: Buffer) => (err = (err + d).slice(-4000)));
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${script} ${args.join(' ')} (in ${cwd}) exited with ${code}: ${err || out.slice(-2000)}`))));
  });
}

export const CURRENT_CHECKOUT = ROOT;
