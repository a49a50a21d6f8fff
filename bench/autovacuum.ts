// A stand-in for autovacuum, for a benchmark whose PostgreSQL runs without it. This machine's PostgreSQL has
// autovacuum off (its CI configuration, conf.d/90-ci.conf); a deployed database has it on. Without it a table that
// grows during a run is never analyzed, and a prepared statement keeps the generic plan it was given while the table
// was small: `POST /customers` checked each claimed address against every wallet with a sequential scan (planned when
// the seed's 25 wallets fit in a page) and fell from 385 creates/s to 121 over a minute's 10-second windows, where it
// goes at 930 to 1,030/s with this (docs/performance.md, "a plan made for an empty table").
//
// What autovacuum does, on its own thresholds, with a short nap: every `everyMs`, each table whose changes since its
// last analyze pass autovacuum_analyze_threshold + autovacuum_analyze_scale_factor x its rows is analyzed, and each
// whose dead rows (or inserts since its last vacuum) pass the vacuum thresholds is vacuumed. An analyze invalidates the
// cached plans that read the table, as autovacuum's would. When the server runs autovacuum itself this does nothing.
import pg from 'pg';

export interface AutovacuumStandIn {
  /** How many tables it analyzed and vacuumed. */
  passes(): { analyzed: number; vacuumed: number };
  /** A pass now, after the one under way if any: what is due is done before the caller measures again. */
  settle(): Promise<void>;
  stop(): Promise<void>;
}

const DUE = `
  SELECT quote_ident(s.schemaname) || '.' || quote_ident(s.relname) AS name,
         s.n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float8 + current_setting('autovacuum_vacuum_scale_factor')::float8 * greatest(c.reltuples, 0)
      OR (current_setting('autovacuum_vacuum_insert_threshold')::float8 >= 0 -- -1: no vacuum for inserts alone
          AND s.n_ins_since_vacuum > current_setting('autovacuum_vacuum_insert_threshold')::float8 + current_setting('autovacuum_vacuum_insert_scale_factor')::float8 * greatest(c.reltuples, 0)) AS vacuum,
         s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8 + current_setting('autovacuum_analyze_scale_factor')::float8 * greatest(c.reltuples, 0) AS analyze
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
   WHERE $1::text[] IS NULL OR s.relname = ANY($1::text[])
   ORDER BY s.relname`;

/** `tables`: only these (by name); all of the database's otherwise. */
export async function standInForAutovacuum(databaseUrl: string, everyMs = 2_000, tables?: string[]): Promise<AutovacuumStandIn> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench autovacuum stand-in' });
  // A connection the server ends (a restart, the database dropped) fails the next pass, which says so; not the bench.
  client.on('error', (err) => process.stderr.write(`autovacuum stand-in: ${err.message}\n`));
  await client.connect();
  const counts = { analyzed: 0, vacuumed: 0 };
  if ((await client.query('SHOW autovacuum')).rows[0].autovacuum === 'on') {
    await client.end();
    return { passes: () => counts, settle: async () => {}, stop: async () => {} };
  }
  let stopped = false;
  let wake: (() => void) | null = null;
  const passNow = async () => {
    const due: { name: string; vacuum: boolean; analyze: boolean }[] = (await client.query(DUE, [tables ?? null])).rows;
    for (const table of due) {
      if (stopped) return;
      // Each as autovacuum decides it: a vacuum, an analyze, or both.
      if (table.vacuum) await client.query(`VACUUM ${table.analyze ? '(ANALYZE) ' : ''}${table.name}`);
      else if (table.analyze) await client.query(`ANALYZE ${table.name}`);
      if (table.analyze) counts.analyzed += 1;
      if (table.vacuum) counts.vacuumed += 1;
    }
  };
  // One pass at a time on the one connection: the loop's and a settle's run one after the other.
  let last: Promise<void> = Promise.resolve();
  const pass = () => (last = last.then(passNow).catch((err: Error) => {
    process.stderr.write(`autovacuum stand-in: ${err.message}\n`);
  }));
  const loop = (async () => {
    while (!stopped) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, everyMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      // A table the run dropped, or a lock it waited on past a statement timeout: the next pass tries again.
      if (!stopped) await pass();
    }
  })();
  return {
    passes: () => ({ ...counts }),
    settle: () => (stopped ? Promise.resolve() : pass()),
    async stop() {
      stopped = true;
      wake?.();
      await loop;
      await last;
      await client.end();
    },
  };
}
