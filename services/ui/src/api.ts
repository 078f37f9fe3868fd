import type { Fields } from './chart-plan';

/*
 * The page's one way to the server: the read API beside it (same origin), with the credential the user
 * signed in with — an account's key, sent as the push API takes keys (Basic, the key as user name), or on
 * the admin listener the admin token (Bearer).
 */

export const READ_BASE = '/read/v1';

export interface Session {
  /** The account a key belongs to; null for the admin token, which names none. */
  readonly account: string | null;
  readonly admin: boolean;
  readonly scope: 'read' | 'write' | null;
}

export interface DatasetListing {
  readonly id: string;
  readonly fields: Fields;
  readonly unique_by: readonly string[];
  readonly record_count: number;
  readonly created_at: string;
  readonly updated_at: string;
}

export interface RecordPage {
  readonly records: Record<string, unknown>[];
  readonly total: number;
  readonly offset: number;
  readonly limit: number;
  readonly next_offset: number | null;
}

export interface AggregateGroups {
  readonly groups: { readonly key: string | null; readonly value: number | null }[];
}

/** A refusal or failure the page shows; `status` 401/403 sends the user back to sign in. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** How a credential is sent: the header's value. */
export const keyAuthorization = (key: string): string => `Basic ${btoa(`${key}:`)}`;
export const tokenAuthorization = (token: string): string => `Bearer ${token}`;

export class ReadApi {
  constructor(
    /** The Authorization header's value. */
    readonly authorization: string,
    readonly account: string,
  ) {}

  private async get<T>(path: string): Promise<T> {
    // credentials 'omit': the page sends its own Authorization header and needs no cookie; and a browser
    // answers a 401 carrying a Basic challenge with its sign-in dialog unless credentials are omitted (the
    // Fetch standard's HTTP-network-or-cache fetch), which would hang a sign-in with a wrong key.
    const res = await fetch(`${READ_BASE}${path}`, { headers: { Authorization: this.authorization, Accept: 'application/json' }, cache: 'no-store', credentials: 'omit' });
    const body = (await res.json().catch(() => undefined)) as { error?: { message?: string } } | undefined;
    if (!res.ok) throw new ApiError(res.status, body?.error?.message ?? `The server answered ${res.status}`);
    return body as T;
  }

  /**
   * Who `credential` is, and the header that says so: tried as a key first, then (the admin listener only)
   * as the admin token. btoa takes Latin-1 only; a credential beyond it is no key or token of ours.
   */
  static async session(credential: string): Promise<{ session: Session; authorization: string }> {
    let asKey: string;
    try {
      asKey = keyAuthorization(credential);
    } catch {
      throw new ApiError(401, 'That is not a valid key or admin token.');
    }
    for (const authorization of [asKey, tokenAuthorization(credential)]) {
      try {
        return { session: await new ReadApi(authorization, '').get<Session>('/session'), authorization };
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 401) throw e;
      }
    }
    throw new ApiError(401, 'That is not a valid key or admin token.');
  }

  private datasetPath(id?: string): string {
    const base = `/accounts/${encodeURIComponent(this.account)}/datasets`;
    return id === undefined ? base : `${base}/${encodeURIComponent(id)}`;
  }

  async datasets(): Promise<DatasetListing[]> {
    return (await this.get<{ datasets: DatasetListing[] }>(this.datasetPath())).datasets;
  }

  records(id: string, offset: number, limit: number): Promise<RecordPage> {
    return this.get<RecordPage>(`${this.datasetPath(id)}/records?${new URLSearchParams({ offset: String(offset), limit: String(limit) }).toString()}`);
  }

  aggregate(id: string, query: URLSearchParams): Promise<AggregateGroups> {
    return this.get<AggregateGroups>(`${this.datasetPath(id)}/aggregate?${query.toString()}`);
  }
}
