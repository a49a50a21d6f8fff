import { AsyncLocalStorage } from 'node:async_hooks';
import type { DataSource } from 'typeorm';

const TRANSACTION_CONTROL = /^\s*(START TRANSACTION|BEGIN|COMMIT|ROLLBACK|SET LOCAL|SAVEPOINT|RELEASE)/i;
const listening = new AsyncLocalStorage<string[]>();

/**
 * The statements `run` sends through `ds` (transaction control left out), as TypeORM hands them to the driver: only
 * those of `run`'s own async calls, so the pools running beside it in this process are not counted.
 */
export async function statementsOf<T>(ds: DataSource, run: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  const logger = ds.logger;
  const logQuery = logger.logQuery.bind(logger);
  const statements: string[] = [];
  logger.logQuery = (query, parameters, runner) => {
    const seen = listening.getStore();
    if (seen && !TRANSACTION_CONTROL.test(query)) seen.push(query.replace(/\s+/g, ' ').trim());
    return logQuery(query, parameters, runner);
  };
  try {
    const result = await listening.run(statements, run);
    return { result, statements };
  } finally {
    logger.logQuery = logQuery;
  }
}
