/**
 * The version of the row `alias` a read saw, as SQL text (for api/rendered.ts): its xmin, the transaction that wrote
 * this version, which every update replaces, and its updated_at. xmin alone names a version within one server's
 * history; a replica promoted after a failover gives out again the transaction ids the old primary had given to
 * transactions it never received, and the updated_at such a transaction wrote (its own now()) tells them apart.
 * An update that leaves updated_at as it was still writes a new xmin.
 */
export function rowVersion(alias: string): string {
  return `${alias}.xmin::text || '@' || ${alias}.updated_at::text`;
}
