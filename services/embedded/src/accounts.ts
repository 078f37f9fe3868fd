import { AccountLogKeyStore, quotasFromLog } from '@pushbase/app';
import { hashApiKey, newApiKey, newKeyId, type KeyStore } from '@pushbase/contracts';
import { ACCOUNT_EVENT_SCHEMA_VERSION, DEFAULT_QUOTAS, type AccountEvent, type AccountsState, type QuotaLimits } from '@pushbase/domain';
import { CombinedKeyStore, MemoryKeyStore, parseBootstrapKeys } from '@pushbase/gateway';
import { FileAccountLog, type AccountLogOptions } from './account-log';
import { checkDataDirFormat } from './data-dir-format';
import { showGeneratedKey } from '@pushbase/data-dir';
import { readLegacyKeys, retireLegacyKeys } from './legacy-keys';

type Logger = (msg: string, fields?: Record<string, unknown>) => void;

export interface EmbeddedAccounts {
  readonly log: FileAccountLog;
  /** PUSHBASE_API_KEYS first (configuration), then the keys of the account log. */
  readonly keys: KeyStore;
}

/** The events that create `account` when the state does not have it yet (an import, the first start). */
const ensureAccount = (state: AccountsState, pending: readonly AccountEvent[], account: string, at: number): AccountEvent[] =>
  state.accounts.has(account) || pending.some((e) => e.type === 'AccountCreated' && e.account === account)
    ? []
    : [{ type: 'AccountCreated', schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account, at, quotas: DEFAULT_QUOTAS }];

const timeOf = (iso: string | undefined, fallback: number): number => {
  const t = iso === undefined ? NaN : Date.parse(iso);
  return Number.isFinite(t) && t >= 0 ? t : fallback;
};

/**
 * Opens the data directory's account log and makes it the source of keys (docs/operations.md → Accounts
 * and API keys):
 *   - an older directory's `api-keys.json` is imported once, as events, then renamed aside; a crash between
 *     the two imports nothing twice (a key whose hash is in the log is skipped). Not once FORMAT exists;
 *   - a first start (empty log, no PUSHBASE_API_KEYS) creates the account `default` and one key, as events,
 *     and shows the key once, never in the log (showGeneratedKey);
 *   - PUSHBASE_API_KEYS keys stay configuration (write scope, in memory, never events), with the quotas of
 *     their account when the log has it, else the defaults.
 */
export async function openAccounts(options: AccountLogOptions & { readonly apiKeys: string; readonly defaults: QuotaLimits; readonly log: Logger; readonly now?: () => number }): Promise<EmbeddedAccounts> {
  const { apiKeys, defaults, log, now = Date.now, ...logOptions } = options;
  const accountLog = await FileAccountLog.open(logOptions);
  const replayed = accountLog.state();
  log('account log replayed', { events: accountLog.size, accounts: replayed.accounts.size, keys: replayed.keysByHash.size });
  try {
    const legacy = await readLegacyKeys(logOptions.dataDir);
    if (legacy !== undefined && (await checkDataDirFormat(logOptions.dataDir)) !== undefined) {
      // This directory was upgraded, so its keys were imported then: this file is from an older release that
      // the guard stopped, with a key it generated and logged. Importing it would make that key work.
      log('warning: api-keys.json is from a release older than this data directory, stopped at start; its keys are not imported. Delete it', { file: legacy.file });
    } else if (legacy !== undefined) {
      const at = now();
      const events: AccountEvent[] = [];
      for (const k of legacy.keys) {
        if (accountLog.state().keysByHash.has(k.hash) || events.some((e) => e.type === 'KeyCreated' && e.hash === k.hash)) continue;
        events.push(...ensureAccount(accountLog.state(), events, k.account, at));
        events.push({ type: 'KeyCreated', schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account: k.account, at: timeOf(k.created_at, at), key_id: newKeyId(), hash: k.hash, scope: 'write', label: 'imported from api-keys.json' });
      }
      if (events.length > 0) await accountLog.append(events);
      const moved = await retireLegacyKeys(legacy.file);
      log('imported api-keys.json into the account log', { keys: legacy.keys.length, events: events.length, moved_to: moved });
    }

    const configured = new MemoryKeyStore(quotasFromLog(accountLog, defaults));
    // Short keys never get here: the configuration refuses them (parseBootstrapKeys).
    for (const { key, account } of parseBootstrapKeys(apiKeys)) configured.add(hashApiKey(key), account);

    if (configured.size === 0 && accountLog.size === 0) {
      const at = now();
      const key = newApiKey();
      await accountLog.append([
        ...ensureAccount(accountLog.state(), [], 'default', at),
        { type: 'KeyCreated', schema_version: ACCOUNT_EVENT_SCHEMA_VERSION, account: 'default', at, key_id: newKeyId(), hash: hashApiKey(key), scope: 'write', label: 'generated at first start' },
      ]);
      await showGeneratedKey(logOptions.dataDir, 'default', key, log);
    }
    return { log: accountLog, keys: new CombinedKeyStore(configured, new AccountLogKeyStore(accountLog, defaults)) };
  } catch (e) {
    await accountLog.close();
    throw e;
  }
}
