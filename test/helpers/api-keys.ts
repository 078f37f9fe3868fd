import { createHash } from 'node:crypto';

/*
 * API keys in tests. The stores keep a key's SHA-256 (hex), never the key: tests compute it here,
 * independently of the code under test (services/app/src/key-material.ts), so a change of that hashing
 * shows up as a failing test rather than as both sides changing together.
 */

/** The SHA-256 of a key, in hex: what the account stores and the accounts topic hold for it. */
export const sha = (key: string): string => createHash('sha256').update(key, 'utf8').digest('hex');
