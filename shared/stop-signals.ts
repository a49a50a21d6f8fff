// SIGTERM and SIGINT, caught from a process's first line. Told to stop while it still boots (connecting to its database
// or Redis, nothing taken on yet), a process ends at once with 0 rather than dying of the signal, which its supervisor
// (npm start, a platform) would report as a crash; once it runs, a signal drains it through the function it gives.

export interface StopSignals {
  /** From now on a signal drains the process through `drain`. */
  drainWith(drain: (signal: NodeJS.Signals) => void): void;
}

export function catchStopSignals(): StopSignals {
  let drain: ((signal: NodeJS.Signals) => void) | undefined;
  const on = (signal: NodeJS.Signals) => (drain ? drain(signal) : process.exit(0));
  process.on('SIGTERM', () => on('SIGTERM'));
  process.on('SIGINT', () => on('SIGINT'));
  return { drainWith: (fn) => void (drain = fn) };
}
