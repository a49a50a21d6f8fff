/**
 * One table's columns read beside another's in the same row (a join), each named `<prefix>__<column>` so they cannot
 * collide with the other table's: the select list, and the two ways back, the joined row taken out of the combined
 * one and the combined row without it.
 */
export interface JoinedColumns<Row> {
  /** `<alias>.<column> AS <prefix>__<name>, ...`, for a SELECT list. */
  readonly select: string;
  /** The joined table's row, named as it is in its own table; undefined when an outer join found none. */
  take(row: Record<string, unknown>): Row | undefined;
  /** The combined row without the joined table's columns. */
  strip<Rest>(row: Record<string, unknown>): Rest;
}

/**
 * `columns` is the joined table's column list as its own reads select it (`id, amount::text, ...`); a column's name in
 * the row is what comes before any cast. The table is found by its `id`, which an outer join leaves null.
 */
export function joinedColumns<Row>(prefix: string, alias: string, columns: string): JoinedColumns<Row> {
  const head = `${prefix}__`;
  const list = columns.split(',').map((c) => c.trim());
  const names = list.map((c) => c.split('::')[0]);
  const aliased = names.map((name) => `${head}${name}`);
  const id = `${head}id`;
  return {
    select: list.map((c, i) => `${alias}.${c} AS ${aliased[i]}`).join(', '),
    take(row) {
      if (row[id] === null || row[id] === undefined) return undefined;
      const own: Record<string, unknown> = {};
      for (let i = 0; i < names.length; i++) own[names[i]] = row[aliased[i]];
      return own as Row;
    },
    strip<Rest>(row: Record<string, unknown>): Rest {
      const rest: Record<string, unknown> = {};
      for (const column in row) if (!column.startsWith(head)) rest[column] = row[column];
      return rest as Rest;
    },
  };
}
