/*
 * How both modes list an account's keys (keyViews, shared by the embedded AccountAdmin and the schema
 * service's distributed one): oldest first, ties by key id in code-unit order, whatever the locale.
 */
import type { AccountInfo, KeyInfo } from '@pushbase/domain';
import { keyViews } from '../src';

const key = (key_id: string, created_at: number): KeyInfo => ({ key_id, account: 'acme', hash: key_id.padEnd(64, '0'), scope: 'write', label: null, created_at });

describe('keyViews', () => {
  it('lists keys oldest first, then by key id in code-unit order', () => {
    const info = { account: 'acme', created_at: 0, quotas: {}, keys: new Map([['b', key('b', 2)], ['a', key('a', 2)], ['Z', key('Z', 2)], ['z', key('z', 1)]]) } as unknown as AccountInfo;
    // 'Z' (U+005A) sorts before 'a' in code units; a locale compare would put it after.
    expect(keyViews(info).map((k) => k.key_id)).toEqual(['z', 'Z', 'a', 'b']);
  });
});
