import { encodeEventBatchText } from '@pushbase/contracts';
import { decideAppend, decideReplace, parseJsonBody, type DatasetEvent, type DatasetSummary, type IdempotencyMark } from '@pushbase/domain';

/*
 * The CPU-heavy half of a write — parse the JSON body, validate and normalise every record, serialise the
 * event — is pure and needs only the dataset's schema, so it can run anywhere: here, or in a pool of worker
 * threads beside the event loop (write-pool.ts), which is what the embedded server and the records service do.
 */

export type WriteKind = 'append' | 'replace';

export interface RawWriteCommand {
  readonly kind: WriteKind;
  readonly account: string;
  readonly id: string;
  /** The request body's bytes. */
  readonly json: Uint8Array;
  readonly at: number;
  /** The write's Idempotency-Key, stored inside its event. */
  readonly idempotency?: IdempotencyMark;
}

export interface DecidedWrite {
  readonly events: readonly DatasetEvent[];
  /** The events as the event log stores them (@pushbase/contracts encodeEventBatch), UTF-8. */
  readonly encoded: Uint8Array;
}

/** Decides one write; rejects with the DomainError that decide raised. */
export type WriteDecider = (cmd: RawWriteCommand, dataset: DatasetSummary | undefined) => Promise<DecidedWrite>;

const encoder = new TextEncoder();

export function decideWriteSync(cmd: RawWriteCommand, dataset: DatasetSummary | undefined): DecidedWrite {
  const { events, text } = decideWriteText(cmd, dataset);
  return { events, encoded: encoder.encode(text) };
}

/** decideWriteSync with the encoded events as text (what a worker also hands back: see write-pool.ts). */
export function decideWriteText(cmd: RawWriteCommand, dataset: DatasetSummary | undefined): { events: readonly DatasetEvent[]; text: string } {
  const body = parseJsonBody(cmd.json);
  const command = { account: cmd.account, id: cmd.id, body, at: cmd.at };
  const event = cmd.kind === 'append' ? decideAppend(command, dataset) : decideReplace(command, dataset);
  const events = [cmd.idempotency === undefined ? event : { ...event, idempotency: cmd.idempotency }];
  return { events, text: encodeEventBatchText(events) };
}

/** Decides on the calling thread. */
export const inProcessDecider: WriteDecider = (cmd, dataset) => new Promise((resolve) => resolve(decideWriteSync(cmd, dataset)));
