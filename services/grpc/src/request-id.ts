import { randomUUID } from 'node:crypto';
import type { Metadata } from '@grpc/grpc-js';

/** The metadata key of the gateway's request id (the same name as the HTTP header it comes from). */
export const REQUEST_ID_KEY = 'x-request-id';

// As the gateway accepts them from clients: short, and nothing that could break a log line or a header.
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The caller's request id, or a fresh one when it sent none (or one not fit to log). */
export function requestIdOf(metadata: Metadata): string {
  const given = metadata.get(REQUEST_ID_KEY)[0];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}
