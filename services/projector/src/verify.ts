import { ClickHouseReadModel, listListedHeads, listStoredHeads, type ClickHouseConnection, type StoredHead } from '@pushbase/clickhouse';
import { readSchemaGeneration, type Redis } from '@pushbase/redis';

/*
 * `pushbase replay --verify`: the rebuilt state against the live one, everything a reader can see — in
 * ClickHouse every dataset's head (deleted ones too) and the listing and every live dataset's records in
 * order; in Redis every key of the schema store. Tombstones, versions and row slots are how the state is
 * stored, not the state, so they are not compared. What and why: docs/architecture.md → Rebuilding the
 * projection.
 */

export interface Difference {
  readonly store: 'clickhouse' | 'redis';
  /** `account/dataset`, or the schema store key without its prefix. */
  readonly subject: string;
  readonly what: string;
}

export interface VerifyReport {
  readonly equal: boolean;
  readonly differences: readonly Difference[];
  readonly checked: { readonly datasets: number; readonly records: number; readonly schemaKeys: number };
}

export interface Generation {
  readonly database: string;
  readonly redisPrefix: string;
}

const HEAD_FIELDS = ['deleted', 'incarnation', 'definition', 'created_at', 'updated_at', 'record_count', 'next_row', 'position'] as const;
const show = (v: unknown): string => {
  const text = JSON.stringify(v) ?? 'undefined';
  return text.length > 160 ? `${text.slice(0, 157)}…` : text;
};

/** Compares `rebuilt` with `live`; `rebuilt` is what replay made, `live` what the projector made. */
export async function compareGenerations(conn: ClickHouseConnection, redis: Redis, live: Generation, rebuilt: Generation): Promise<VerifyReport> {
  const differences: Difference[] = [];
  const ch = (subject: string, what: string): void => void differences.push({ store: 'clickhouse', subject, what });

  const [liveHeads, rebuiltHeads] = await Promise.all([listStoredHeads(conn, live.database), listStoredHeads(conn, rebuilt.database)]);
  const byKey = (heads: readonly StoredHead[]): Map<string, StoredHead> => new Map(heads.map((h) => [`${h.account}/${h.dataset}`, h]));
  const liveByKey = byKey(liveHeads);
  const rebuiltByKey = byKey(rebuiltHeads);
  const liveStore = new ClickHouseReadModel(conn, live.database);
  const rebuiltStore = new ClickHouseReadModel(conn, rebuilt.database);
  let records = 0;
  const keys = [...new Set([...liveByKey.keys(), ...rebuiltByKey.keys()])].sort();
  for (const key of keys) {
    const l = liveByKey.get(key);
    const r = rebuiltByKey.get(key);
    if (l === undefined || r === undefined) {
      ch(key, l === undefined ? 'only in the rebuilt projection' : 'only in the live projection');
      continue;
    }
    const fields = HEAD_FIELDS.filter((f) => JSON.stringify(l[f]) !== JSON.stringify(r[f]));
    for (const f of fields) ch(key, `${f}: live ${show(l[f])}, rebuilt ${show(r[f])}`);
    if (l.deleted || r.deleted || l.incarnation !== r.incarnation) continue;
    const [lr, rr] = await Promise.all([liveStore.listRecords(l.account, l.dataset), rebuiltStore.listRecords(r.account, r.dataset)]);
    const a = (lr ?? []).map((x) => JSON.stringify(x));
    const b = (rr ?? []).map((x) => JSON.stringify(x));
    records += b.length;
    if (a.length !== b.length) ch(key, `records: live has ${a.length}, rebuilt ${b.length}`);
    const first = a.findIndex((x, i) => x !== b[i]);
    if (first !== -1 && first < b.length) ch(key, `records differ from index ${first}: live ${show(a[first])}, rebuilt ${show(b[first])}`);
  }

  // The listing the admin routes serve comes from the heads table, a copy of the head rows.
  const [liveListed, rebuiltListed] = await Promise.all([listListedHeads(conn, live.database), listListedHeads(conn, rebuilt.database)]);
  const listed = (rows: typeof liveListed): Map<string, string> =>
    new Map(rows.map((h) => [`${h.account}/${h.dataset}`, JSON.stringify([h.incarnation, h.record_count, h.deleted])]));
  const ll = listed(liveListed);
  const rl = listed(rebuiltListed);
  for (const key of [...new Set([...ll.keys(), ...rl.keys()])].sort()) {
    if (ll.get(key) !== rl.get(key)) ch(key, `listing [incarnation, record_count, deleted]: live ${ll.get(key) ?? 'absent'}, rebuilt ${rl.get(key) ?? 'absent'}`);
  }

  const [liveSchema, rebuiltSchema] = await Promise.all([readSchemaGeneration(redis, live.redisPrefix), readSchemaGeneration(redis, rebuilt.redisPrefix)]);
  const schemaKeys = [...new Set([...liveSchema.keys(), ...rebuiltSchema.keys()])].sort();
  for (const key of schemaKeys) {
    const l = liveSchema.get(key);
    const r = rebuiltSchema.get(key);
    if (l === r) continue;
    differences.push({ store: 'redis', subject: key, what: l === undefined ? `only in the rebuilt schema store: ${show(r)}` : r === undefined ? `only in the live schema store: ${show(l)}` : `live ${show(l)}, rebuilt ${show(r)}` });
  }

  return { equal: differences.length === 0, differences, checked: { datasets: keys.length, records, schemaKeys: schemaKeys.length } };
}

/** The report as lines for a terminal: a verdict, counts per store, the first `limit` differences. */
export function formatReport(report: VerifyReport, limit = 20): string[] {
  const { datasets, records, schemaKeys } = report.checked;
  const checked = `${datasets} datasets, ${records} records, ${schemaKeys} schema store keys`;
  if (report.equal) return [`verify: the rebuilt state equals the live one (${checked})`];
  const count = (store: Difference['store']): number => report.differences.filter((d) => d.store === store).length;
  const lines = [
    `verify: the rebuilt state DIFFERS from the live one: ${report.differences.length} differences (ClickHouse ${count('clickhouse')}, Redis ${count('redis')}; compared ${checked})`,
    ...report.differences.slice(0, limit).map((d) => `  ${d.store} ${d.subject}: ${d.what}`),
  ];
  if (report.differences.length > limit) lines.push(`  … and ${report.differences.length - limit} more`);
  return lines;
}
