// Child processes of the benchmark, started as development starts them (node --import tsx; the Procfile runs the
// same entry points compiled, from dist/), stopped with SIGTERM.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import net from 'node:net';

export interface Started {
  script: string;
  args?: string[];
  child: ChildProcess;
}

/**
 * Starts `script` and resolves once its stdout shows `ready`; stdout keeps draining so logging never blocks it.
 * `cwd`: another checkout to run it from (a benchmark's baseline revision); `logFile`: where its output is kept;
 * `nodeArgs`: Node's own options (a profiler's, which NODE_OPTIONS refuses).
 */
export function startProcess(
  script: string, env: Record<string, string>, ready: string, args: string[] = [], { logFile, cwd, nodeArgs = [] }: { logFile?: string; cwd?: string; nodeArgs?: string[] } = {},
): Promise<Started> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'inherit'] });
    let seen = '';
    const onData = (d: Buffer) => {
      seen = (seen + d).slice(-4096);
      if (seen.includes(ready)) {
        child.stdout!.off('data', onData);
        // Kept when asked for (a fault run's FAULT_LOG_DIR: what a person reads when a seed does not hold).
        if (logFile) {
          const file = createWriteStream(logFile, { flags: 'a' });
          file.write(seen);
          child.stdout!.pipe(file);
        } else child.stdout!.resume();
        resolve({ script, args, child });
      }
    };
    child.stdout!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`${script} exited with ${code} before it was ready`)));
  });
}

export async function stopProcess({ child }: Started): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** A TCP port nothing listens on just now, for a child process of the test to take. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
