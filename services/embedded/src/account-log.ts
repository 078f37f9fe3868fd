import path from 'node:path';
import type { AccountLog } from '@pushbase/app';
import { decodeAccountEventValue, encodeAccountEventBatch } from '@pushbase/contracts';
import { emptyAccounts, foldAccounts, type AccountEvent, type AccountsState } from '@pushbase/domain';
import { FileEventLog, type FileEventLogOptions, type LogCodec } from './file-event-log';

/*
 * The embedded account log: accounts and keys as events (docs/operations.md → Accounts and API keys), in a log of their own beside the
 * dataset log, `<dataDir>/accounts/log/<20 digits>.seg`. The very same FileEventLog — segments, one crc per
 * group commit, fdatasync before an append resolves, a torn last commit cut at start and damage inside
 * acknowledged data refused — over a codec of account events instead of dataset events, so there is one
 * log format to trust. Apart from the dataset log because its reader is different (whoever resolves keys),
 * it is small, and it is never compacted: replaying it whole at every start is cheap, and the dataset log's
 * snapshots need not know about accounts.
 */

export const ACCOUNT_LOG_DIR = 'accounts';

export const ACCOUNT_EVENT_CODEC: LogCodec<AccountEvent> = { encode: encodeAccountEventBatch, decode: decodeAccountEventValue };

export type AccountLogOptions = Omit<FileEventLogOptions, 'dir'> & { readonly dataDir: string };

/** The account log of a data directory and its fold, kept current by the log's listener. */
export class FileAccountLog implements AccountLog {
  readonly log: FileEventLog<AccountEvent>;
  private folded: AccountsState = emptyAccounts();
  private events = 0;

  private constructor(options: AccountLogOptions) {
    const { dataDir, ...rest } = options;
    this.log = new FileEventLog<AccountEvent>({ ...rest, dir: path.join(dataDir, ACCOUNT_LOG_DIR), codec: ACCOUNT_EVENT_CODEC });
  }

  /** Opens the log (repairing a torn tail) and folds every event in it. */
  static async open(options: AccountLogOptions): Promise<FileAccountLog> {
    const accounts = new FileAccountLog(options);
    await accounts.log.start((events) => {
      accounts.folded = foldAccounts(events, accounts.folded);
      accounts.events += events.length;
    });
    return accounts;
  }

  state(): AccountsState {
    return this.folded;
  }

  /** Account events in the log (replayed and appended since). */
  get size(): number {
    return this.events;
  }

  /** Durable (fdatasync'd) and folded before it resolves: the listener runs before the append resolves. */
  append(events: readonly AccountEvent[]): Promise<void> {
    return this.log.append(events);
  }

  close(): Promise<void> {
    return this.log.close();
  }
}
