/**
 * The version of the row `alias` a read saw, as SQL text (for api/rendered.ts): its xmin, the transaction that wrote
 * this version, which every update replaces, and its updated_at. xmin alone names a version within one server's
 * history; a replica promoted after a failover (or a server restored to an earlier point, or one that lost its last
 * asynchronous commits in a crash) gives out again the transaction ids of transactions that were lost, and the
 * updated_at each wrote tells such versions apart: on the tables read this way every update moves updated_at (the
 * updated_at_moves trigger, migration 1764800000000), to its transaction's now() unless it sets another value.
 */
export function rowVersion(alias: string): string {
  return `${alias}.xmin::text || '@' || ${alias}.updated_at::text`;
}
