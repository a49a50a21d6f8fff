import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../shared/logger.js';

/** A real pino logger (with the service's redaction) writing into memory, for asserting on log lines. */
export function captureLogs(level = 'debug'): { log: Logger; lines: () => string[]; text: () => string } {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  const log = createLogger({ level, destination });
  const lines = () => chunks.join('').split('\n').filter(Boolean);
  return { log, lines, text: () => chunks.join('') };
}
