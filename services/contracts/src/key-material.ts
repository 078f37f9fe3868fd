import { createHash, randomBytes } from 'node:crypto';

/*
 * What an API key is made of, in one place for every mode and store (the account admins, the gateways, the
 * Redis key store): the key (shown once), its hash (all that is stored, in events and stores alike) and its
 * public handle.
 */

/** Keys are stored only as SHA-256 hashes; a high-entropy key needs no slow hash. */
export const hashApiKey = (apiKey: string): string => createHash('sha256').update(apiKey, 'utf8').digest('hex');

/** A fresh key: 32 random bytes, URL-safe, shown once. */
export const newApiKey = (): string => `pb_${randomBytes(32).toString('base64url')}`;

/** A key's public handle: random, listed, used to revoke; it says nothing about the key. */
export const newKeyId = (): string => `kid_${randomBytes(8).toString('hex')}`;

/**
 * The handle of a key that has no KeyCreated event (a PUSHBASE_API_KEYS key, an older Redis entry): derived
 * from its hash so it is the same on every start and every gateway. A hash prefix cannot authenticate.
 */
export const configuredKeyId = (hash: string): string => `cfg_${hash.slice(0, 16)}`;
