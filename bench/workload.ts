/*
 * The benchmark's workload, shared by the orchestrator (run.ts) and the load generator (loadgen.ts):
 * one dataset definition and 500-record append bodies shaped like a typical dashboard feed.
 */

export const RECORDS_PER_REQUEST = 500;

/** Seven fields of five types, no unique_by: every append adds 500 rows and the window trims the oldest. */
export const DATASET_DEFINITION = {
  fields: {
    day: { type: 'date', name: 'Day' },
    at: { type: 'datetime', name: 'Recorded at' },
    region: { type: 'string', name: 'Region' },
    product: { type: 'string', name: 'Product' },
    units: { type: 'number', name: 'Units sold' },
    revenue: { type: 'money', name: 'Revenue', currency_code: 'USD' },
    share: { type: 'percentage', name: 'Share', optional: true },
  },
  unique_by: [] as string[],
};

const REGIONS = ['emea-west', 'emea-east', 'apac-north', 'apac-south', 'amer-north', 'amer-south'];

/** A deterministic pseudo-random sequence (no Math.random, so runs are comparable). */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

export interface BenchRecord {
  day: string;
  at: string;
  region: string;
  product: string;
  units: number;
  revenue: number;
  share: number | null;
}

/** `count` records; `seed` varies the values so bodies are not byte-identical. */
export function makeRecords(seed: number, count: number = RECORDS_PER_REQUEST): BenchRecord[] {
  const rnd = lcg(seed);
  const base = Date.UTC(2024, 0, 1) + (seed % 365) * 86_400_000;
  return Array.from({ length: count }, (_, i) => {
    const at = new Date(base + Math.floor(rnd() * 86_400_000));
    return {
      day: at.toISOString().slice(0, 10),
      at: i % 3 === 0 ? at.toISOString().replace('.000Z', 'Z') : at.toISOString().replace('Z', '+00:00'),
      region: REGIONS[i % REGIONS.length]!,
      product: `widget-${String(Math.floor(rnd() * 1000)).padStart(3, '0')}`,
      units: Math.floor(rnd() * 500),
      revenue: Math.floor(rnd() * 10_000_000),
      share: i % 7 === 0 ? null : Math.round(rnd() * 1000) / 1000,
    };
  });
}

/** The JSON body of one append request, as a client would send it. */
export const appendBody = (seed: number): string => JSON.stringify({ data: makeRecords(seed) });
