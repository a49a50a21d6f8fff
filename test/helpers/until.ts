/**
 * The one wait the tests use: polls `check` until it answers a value (anything but undefined, null or false) and
 * returns it; past `timeoutMs` it throws, naming `what` and the last thing `check` saw (its `describe`).
 */
export async function until<T>(
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  options: { timeoutMs?: number; everyMs?: number; what?: string; describe?: () => unknown } = {},
): Promise<T> {
  const { timeoutMs = 10_000, everyMs = 20, what = 'the condition' } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) return value as T;
    if (Date.now() > deadline) {
      const seen = options.describe ? `: ${JSON.stringify(options.describe())}` : '';
      throw new Error(`${what} did not happen within ${timeoutMs} ms${seen}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
