/*
 * Validation accepts exactly what docs/api.md → Fields and values accepts: valid values are generated per type and must be
 * taken (normalised as promised), invalid ones must be refused. Oracles are written independently of the
 * domain code (Date is allowed on the test side; the domain itself may not use it).
 */
import fc from 'fast-check';
import {
  DomainError,
  FIELD_TYPES,
  TIME_UNITS,
  decideDefine,
  formatUtcMillis,
  isCalendarDate,
  parseDatasetId,
  parseDateMillis,
  parseDateTimeMillis,
  parseDefinition,
  parseRecord,
  type DatasetDefinition,
  type FieldDefinition,
} from '../src';
import { ACCOUNT, AT } from './specification';

const RUNS = { numRuns: 300 };

const defOf = (f: FieldDefinition): DatasetDefinition => ({ fields: { v: f }, unique_by: [] });
const number = defOf({ type: 'number', name: 'N', optional: false });
const percentage = defOf({ type: 'percentage', name: 'P', optional: false });
const duration = defOf({ type: 'duration', name: 'D', optional: false, time_unit: 'minutes' });
const money = defOf({ type: 'money', name: 'M', optional: false, currency_code: 'EUR' });
const string = defOf({ type: 'string', name: 'S', optional: false });
const date = defOf({ type: 'date', name: 'D', optional: false });
const datetime = defOf({ type: 'datetime', name: 'T', optional: false });

/** The normalised value, or 'refused'. */
function outcome(def: DatasetDefinition, value: unknown): unknown {
  try {
    return parseRecord(def, { v: value }, 0).v;
  } catch (e) {
    if (e instanceof DomainError && e.code === 'invalid') return 'refused';
    throw e;
  }
}
const refused = (def: DatasetDefinition, value: unknown): boolean => outcome(def, value) === 'refused';

/** Any JSON value that is not null (null is the "missing" value, covered elsewhere). */
const jsonNonNull = fc.jsonValue().filter((v) => v !== null);

describe('numbers', () => {
  it.each([
    ['number', number],
    ['percentage', percentage],
    ['duration', duration],
  ])('%s takes exactly the finite numbers, unchanged', (_type, def) => {
    fc.assert(
      fc.property(fc.oneof(fc.double(), fc.integer(), jsonNonNull), (v) => {
        if (typeof v === 'number' && Number.isFinite(v)) expect(Object.is(outcome(def, v), v)).toBe(true);
        else expect(refused(def, v)).toBe(true);
      }),
      RUNS,
    );
  });

  it('money takes exactly the integers within ±2^53, unchanged', () => {
    const near = fc.oneof(
      fc.maxSafeInteger(),
      fc.constantFrom(2 ** 53, -(2 ** 53), 2 ** 53 + 2, -(2 ** 53) - 2, 795.0, 795.5),
      fc.double(),
      fc.double({ min: -(2 ** 54), max: 2 ** 54 }),
    );
    fc.assert(
      fc.property(fc.oneof(near, jsonNonNull), (v) => {
        if (typeof v === 'number' && Number.isInteger(v) && v <= 2 ** 53 && v >= -(2 ** 53)) expect(Object.is(outcome(money, v), v)).toBe(true);
        else expect(refused(money, v)).toBe(true);
      }),
      RUNS,
    );
  });
});

describe('strings', () => {
  const codePoints = (s: string): number => Array.from(s).length;
  const around100 = fc
    .tuple(fc.integer({ min: 95, max: 105 }), fc.constantFrom('x', '😀', '漢', 'e\u0301', '\ud800'))
    .map(([n, c]) => c.repeat(Math.ceil(n / codePoints(c))).slice(0, n));

  // Code points of every plane, lone surrogates included (fc's 'binary' unit is slow at these lengths).
  const anyCodePoints = fc
    .array(fc.oneof(fc.integer({ min: 0, max: 0x7f }), fc.integer({ min: 0x80, max: 0xffff }), fc.integer({ min: 0x10000, max: 0x10ffff })), { maxLength: 110 })
    .map((cps) => String.fromCodePoint(...cps));

  it('takes exactly the well-formed strings of at most 100 code points (the empty string included), unchanged', () => {
    fc.assert(
      fc.property(
        fc.oneof(anyCodePoints, fc.string({ unit: 'grapheme', maxLength: 60 }), around100, fc.constant('')),
        (s) => {
          if (codePoints(s) <= 100 && s.isWellFormed()) expect(outcome(string, s)).toBe(s);
          else expect(refused(string, s)).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it('refuses every non-string value', () => {
    fc.assert(
      fc.property(
        jsonNonNull.filter((v) => typeof v !== 'string'),
        (v) => expect(refused(string, v)).toBe(true),
      ),
      RUNS,
    );
  });
});

const pad = (n: number, w: number): string => String(n).padStart(w, '0');
/** Oracle: is y-m-d a real date of the proleptic Gregorian calendar? */
function realDate(y: number, m: number, d: number): boolean {
  if (m < 1 || m > 12 || d < 1) return false;
  const t = new Date(0);
  t.setUTCFullYear(y, m - 1, d);
  return t.getUTCFullYear() === y && t.getUTCMonth() === m - 1 && t.getUTCDate() === d;
}

describe('dates', () => {
  const parts = fc.record({ y: fc.integer({ min: 0, max: 9999 }), m: fc.integer({ min: 0, max: 13 }), d: fc.integer({ min: 0, max: 32 }) });

  it('takes exactly the real calendar dates written YYYY-MM-DD, unchanged', () => {
    fc.assert(
      fc.property(fc.oneof(parts, parts.map((p) => ({ ...p, m: 2, d: 28 + (p.d % 3) }))), ({ y, m, d }) => {
        const s = `${pad(y, 4)}-${pad(m, 2)}-${pad(d, 2)}`;
        if (realDate(y, m, d)) expect(outcome(date, s)).toBe(s);
        else expect(refused(date, s)).toBe(true);
        expect(isCalendarDate(s)).toBe(realDate(y, m, d));
        expect(parseDateMillis(s)).toBe(realDate(y, m, d) ? Date.parse(`${s}T00:00:00Z`) : undefined);
      }),
      RUNS,
    );
  });

  it('refuses any other string or value', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          jsonNonNull,
          fc.string(),
          parts.map(({ y, m, d }) => `${y}-${m}-${d}`).filter((s) => !/^\d{4}-\d{2}-\d{2}$/.test(s)),
          parts.map(({ y, m, d }) => `${pad(y, 4)}-${pad(m, 2)}-${pad(d, 2)}T00:00:00Z`),
        ),
        (v) => {
          const ok = typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v) && realDate(Number(v.slice(0, 4)), Number(v.slice(5, 7)), Number(v.slice(8, 10)));
          expect(refused(date, v)).toBe(!ok);
        },
      ),
      RUNS,
    );
  });
});

describe('datetimes', () => {
  // 0000-01-02 to 9999-12-30, so any written offset keeps the local time within four-digit years.
  const LOW = -62167219200000 + 86_400_000;
  const HIGH = 253402300799999 - 86_400_000;
  const offsetArb = fc.oneof(
    fc.constant<number | 'Z' | 'none'>('Z'),
    fc.constant<number | 'Z' | 'none'>('none'),
    fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 }),
  );

  it('takes ISO 8601 date-times with Z, ±hh:mm or no offset and stores the UTC instant, truncated to the millisecond', () => {
    fc.assert(
      fc.property(fc.integer({ min: LOW, max: HIGH }), offsetArb, fc.stringMatching(/^\d{0,6}$/), fc.boolean(), (ms, offset, extraDigits, withFraction) => {
        const offsetMin = typeof offset === 'number' ? offset : 0;
        const local = new Date(ms + offsetMin * 60_000).toISOString(); // YYYY-MM-DDThh:mm:ss.sssZ
        const fraction = withFraction ? `.${local.slice(20, 23)}${extraDigits}` : '';
        const suffix =
          offset === 'Z' ? 'Z' : offset === 'none' ? '' : `${offset < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(offset) / 60), 2)}:${pad(Math.abs(offset) % 60, 2)}`;
        const written = `${local.slice(0, 19)}${fraction}${suffix}`;
        const expected = new Date(withFraction ? ms : ms - (((ms % 1000) + 1000) % 1000)).toISOString();
        expect(outcome(datetime, written)).toBe(expected);
        expect(parseDateTimeMillis(written)).toBe(Date.parse(expected));
      }),
      RUNS,
    );
  });

  it('refuses out-of-range components, impossible dates and offsets', () => {
    const comps = fc.record({
      y: fc.integer({ min: 1000, max: 9998 }),
      mo: fc.integer({ min: 0, max: 13 }),
      d: fc.integer({ min: 0, max: 32 }),
      h: fc.integer({ min: 0, max: 30 }),
      mi: fc.integer({ min: 0, max: 70 }),
      s: fc.integer({ min: 0, max: 70 }),
      oh: fc.integer({ min: 0, max: 30 }),
      om: fc.integer({ min: 0, max: 70 }),
    });
    fc.assert(
      fc.property(comps, ({ y, mo, d, h, mi, s, oh, om }) => {
        const written = `${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)}T${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}+${pad(oh, 2)}:${pad(om, 2)}`;
        const valid = realDate(y, mo, d) && h <= 23 && mi <= 59 && s <= 59 && oh <= 23 && om <= 59;
        expect(refused(datetime, written)).toBe(!valid);
      }),
      RUNS,
    );
  });

  it('refuses every non-string value and strings that are not date-times', () => {
    fc.assert(
      fc.property(fc.oneof(jsonNonNull.filter((v) => typeof v !== 'string'), fc.string({ maxLength: 12 })), (v) => {
        expect(refused(datetime, v)).toBe(true);
      }),
      RUNS,
    );
  });

  it('formats any instant of years 0000–9999 as Date#toISOString does', () => {
    fc.assert(
      fc.property(fc.integer({ min: -62167219200000, max: 253402300799999 }), (ms) => expect(formatUtcMillis(ms)).toBe(new Date(ms).toISOString())),
      RUNS,
    );
  });
});

// ---------------------------------------------------------------------------------------------------
// Identifiers and definitions.

const ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';
/** Oracle written by hand, not with the domain's regular expression. */
function validDatasetId(id: string): boolean {
  if (id.length < 1 || id.length > 100) return false;
  for (const c of id) if (!(ALNUM + '._-').includes(c)) return false;
  return ALNUM.includes(id[0] as string) && ALNUM.includes(id[id.length - 1] as string);
}
function validFieldKey(key: string): boolean {
  if (key.length < 1 || key.length > 50) return false;
  if (!'abcdefghijklmnopqrstuvwxyz'.includes(key[0] as string)) return false;
  for (const c of key) if (!(ALNUM + '_').includes(c)) return false;
  return true;
}

describe('identifiers', () => {
  const idChar = fc.constantFrom(...'az09._-'.split(''), 'a', 'm', '5', 'A', ' ', '/', '%', 'é', ':');
  const longish = fc.tuple(fc.integer({ min: 97, max: 103 }), fc.constantFrom('a', 'a.', '-')).map(([n, c]) => `z${c.repeat(n)}`.slice(0, n) + '9');

  it('accept exactly the dataset ids of 1–100 characters of a-z 0-9 . _ -, starting and ending alphanumeric', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: idChar, maxLength: 12 }), longish, fc.string()), (id) => {
        let ok = true;
        try {
          parseDatasetId(id);
        } catch {
          ok = false;
        }
        expect(ok).toBe(validDatasetId(id));
      }),
      RUNS,
    );
  });

  it('accept exactly the field keys ^[a-z][a-z0-9_]{0,49}$', () => {
    const keyChar = fc.constantFrom(...'abz09_'.split(''), 'A', '-', '.', ' ', 'é');
    const long = fc.integer({ min: 48, max: 53 }).map((n) => 'k'.repeat(n));
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: keyChar, maxLength: 8 }), long, fc.string({ maxLength: 8 })), (key) => {
        let ok = true;
        try {
          parseDefinition({ fields: { [key]: { type: 'number', name: 'N' } } });
        } catch {
          ok = false;
        }
        expect(ok).toBe(validFieldKey(key));
      }),
      RUNS,
    );
  });
});

describe('same definition', () => {
  const fieldArb = fc.oneof(
    fc.constantFrom<FieldDefinition['type']>('date', 'datetime', 'number', 'percentage', 'string').map((type) => ({ type })),
    fc.constantFrom('USD', 'EUR', 'JPY', 'GBP').map((currency_code) => ({ type: 'money' as const, currency_code })),
    fc.constantFrom(...TIME_UNITS).map((time_unit) => ({ type: 'duration' as const, time_unit })),
  );
  type Generated = { fields: { key: string; def: Record<string, unknown> }[]; unique_by: string[] };
  const defArb = fc
    .uniqueArray(fc.stringMatching(/^[a-z][a-z0-9_]{0,6}$/), { minLength: 1, maxLength: 10 })
    .chain((keys) =>
      fc.record({
        fields: fc.tuple(...keys.map((k) => fc.record({ key: fc.constant(k), f: fieldArb, name: fc.constantFrom('A', 'B', 'Name'), optional: fc.constantFrom(true, false, undefined) }))),
        unique: fc.subarray(keys, { maxLength: Math.min(3, keys.length) }),
      }),
    )
    .map(({ fields, unique }): Generated => {
      const byKey = new Map(fields.map((x) => [x.key, x]));
      const multiOk = unique.filter((k) => ['string', 'date', 'datetime'].includes(byKey.get(k)?.f.type ?? ''));
      return {
        fields: fields.map(({ key, f, name, optional }) => ({ key, def: { ...f, name, ...(optional === undefined ? {} : { optional }) } })),
        unique_by: unique.length > 1 ? multiOk : unique,
      };
    });
  const body = (g: Generated) => ({ fields: Object.fromEntries(g.fields.map((f) => [f.key, f.def])), unique_by: g.unique_by });
  const decideAgainst = (stored: Generated, requested: unknown) => {
    const created = decideDefine({ account: ACCOUNT, id: 'ds', body: body(stored), at: AT, newIncarnation: 'i' }, undefined, 0);
    return decideDefine({ account: ACCOUNT, id: 'ds', body: requested, at: AT, newIncarnation: 'j' }, created.dataset, 1);
  };

  it('ignores key order, unique_by order and optional: false written or left out', () => {
    fc.assert(
      fc.property(defArb, fc.nat(), fc.boolean(), (g, seed, writeFalse) => {
        const rotate = <T>(xs: T[]): T[] => (xs.length === 0 ? xs : [...xs.slice(seed % xs.length), ...xs.slice(0, seed % xs.length)]);
        const same: Generated = {
          fields: rotate(g.fields)
            .reverse()
            .map(({ key, def }) => {
              const { optional, ...rest } = def;
              return { key, def: optional === true ? def : writeFalse ? { ...rest, optional: false } : rest };
            }),
          unique_by: rotate([...g.unique_by]).reverse(),
        };
        expect(decideAgainst(g, body(same)).outcome).toBe('found');
      }),
      { numRuns: 200 },
    );
  });

  it('answers a conflict when one property, field or the unique_by set differs', () => {
    const change = fc.constantFrom('type', 'name', 'optional', 'add', 'remove', 'unique');
    fc.assert(
      fc.property(defArb, change, fc.nat(), (g, what, seed) => {
        const i = seed % g.fields.length;
        const target = g.fields[i]!;
        const fields = g.fields.map((f) => ({ ...f, def: { ...f.def } }));
        let unique_by = [...g.unique_by];
        const t = fields[i]!.def;
        switch (what) {
          case 'type':
            // Another type that needs no extra and is allowed in a multi-field unique_by (date or datetime).
            t.type = FIELD_TYPES.find((x) => x !== target.def.type && x !== 'money' && x !== 'duration');
            delete t.currency_code;
            delete t.time_unit;
            break;
          case 'name':
            t.name = `${String(target.def.name)}!`;
            break;
          case 'optional':
            t.optional = target.def.optional !== true;
            break;
          case 'add':
            if (fields.length === 10) return; // cannot add an 11th
            fields.push({ key: 'zz_extra', def: { type: 'number', name: 'X' } }); // generated keys are shorter
            break;
          case 'remove':
            if (fields.length === 1) return;
            fields.splice(i, 1);
            unique_by = unique_by.filter((k) => k !== target.key);
            break;
          case 'unique':
            unique_by = g.unique_by.length === 0 ? [target.key] : [];
            break;
        }
        let thrown: unknown;
        try {
          decideAgainst(g, body({ fields, unique_by }));
        } catch (e) {
          thrown = e;
        }
        expect(thrown).toBeInstanceOf(DomainError);
        expect((thrown as DomainError).code).toBe('conflict');
        expect((thrown as DomainError).message.startsWith('A dataset with different fields already exists with the ID "ds"')).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});
