/*
 * docs/openapi.yaml and the domain's parsers say the same about what they can both judge without stored
 * data: a field definition is valid for the document exactly when the server takes it, and a `delete_by` /
 * `deleteBy` the document refuses is refused by the server too (whether a key names a date field of the
 * dataset is data the document cannot know). The schemathesis e2e test finds such drift by fuzzing the
 * live server; this finds the same without a server, in the unit run, over every combination that matters.
 */
import { codes as currencyCodes } from 'currency-codes';
import { DomainError, isCurrencyCode, parseDeleteBy, parseDefinition, type DatasetDefinition } from '@pushbase/domain';
import { isObject, loadOpenApiDocument, resolvePointer, validateRequestBody } from '../helpers/openapi';

const serverTakes = (fn: () => unknown): boolean => {
  try {
    fn();
    return true;
  } catch (err) {
    if (err instanceof DomainError && err.code === 'invalid') return false;
    throw err;
  }
};

const ABSENT = Symbol('absent');
const TYPES = ['date', 'datetime', 'number', 'percentage', 'string', 'money', 'duration'] as const;
const CURRENCIES: unknown[] = [ABSENT, null, 'USD', 'ZWG', 'usd', 'AAA', 'US', '', 840, ['USD'], {}];
const UNITS: unknown[] = [ABSENT, null, 'seconds', 'hours', 'days', 'Seconds', '', 1000, ['hours'], true];

describe('docs/openapi.yaml and the domain agree', () => {
  it('lists exactly the currency codes the server accepts', () => {
    const node = resolvePointer(loadOpenApiDocument(), '#/components/schemas/CurrencyCode');
    const listed = isObject(node) && Array.isArray(node.enum) ? (node.enum as unknown[]) : [];
    expect([...listed].sort()).toEqual([...currencyCodes()].sort());
    for (const code of listed) expect(isCurrencyCode(String(code))).toBe(true);
  });

  it.each(TYPES)('on every currency_code and time_unit of a %s field', (type) => {
    const disagreements: string[] = [];
    for (const currency_code of CURRENCIES) {
      for (const time_unit of UNITS) {
        const def: Record<string, unknown> = { type, name: 'Value' };
        if (currency_code !== ABSENT) def.currency_code = currency_code;
        if (time_unit !== ABSENT) def.time_unit = time_unit;
        const body = { fields: { value: def } };
        const documented = validateRequestBody('PUT', '/datasets/{id}', body).length === 0;
        const taken = serverTakes(() => parseDefinition(body));
        if (documented !== taken) disagreements.push(`${JSON.stringify(def)}: document ${documented ? 'allows' : 'refuses'}, server ${taken ? 'takes' : 'refuses'}`);
      }
    }
    expect(disagreements).toEqual([]);
  });

  it('on the length of a field name, counted in code points by both', () => {
    const disagreements: string[] = [];
    for (const name of ['', 'N', 'N'.repeat(250), 'N'.repeat(251), '😀'.repeat(250), '😀'.repeat(251), `${'e'.repeat(249)}\u0301`, `${'e'.repeat(250)}\u0301`]) {
      const body = { fields: { value: { type: 'number', name } } };
      const documented = validateRequestBody('PUT', '/datasets/{id}', body).length === 0;
      const taken = serverTakes(() => parseDefinition(body));
      if (documented !== taken) disagreements.push(`a name of ${name.length} UTF-16 units: document ${documented ? 'allows' : 'refuses'}, server ${taken ? 'takes' : 'refuses'}`);
    }
    expect(disagreements).toEqual([]);
  });

  it('on delete_by and deleteBy: what the document refuses, the server refuses', () => {
    const def: DatasetDefinition = parseDefinition({ fields: { day: { type: 'date', name: 'Day' }, at: { type: 'datetime', name: 'At' }, n: { type: 'number', name: 'N' } } });
    const values: unknown[] = [ABSENT, null, '', 'day', 'at', ['day'], [''], [], ['day', 'day'], [null], [5], 5, false, {}, 'Day', 'no such'];
    const disagreements: string[] = [];
    let refusedByDocument = 0;
    for (const delete_by of values) {
      for (const deleteBy of values) {
        const body: Record<string, unknown> = { data: [] };
        if (delete_by !== ABSENT) body.delete_by = delete_by;
        if (deleteBy !== ABSENT) body.deleteBy = deleteBy;
        if (validateRequestBody('POST', '/datasets/{id}/data', body).length === 0) continue;
        refusedByDocument++;
        if (serverTakes(() => parseDeleteBy(def, body))) disagreements.push(`${JSON.stringify(body)}: document refuses, server takes`);
      }
    }
    expect(refusedByDocument).toBeGreaterThan(100);
    expect(disagreements).toEqual([]);
  });
});
