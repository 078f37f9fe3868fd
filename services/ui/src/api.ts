import type { Fields } from './chart-plan';

/*
 * The page's one way to the server: the read API beside it (same origin), with the credential the user
 * signed in with as a bearer token — a read-only key of an account, or the admin token.
 */

export const READ_BASE = '/read/v1';

export interface Session {
  /** The account a key belongs to; null for the admin token, which names none. */
  readonly account: string | null;
  readonly admin: boolean;
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

export class ReadApi {
  constructor(
    private readonly credential: string,
    readonly account: string,
  ) {}

  private async get<T>(path: string): Promise<T> {
    const res = await fetch(`${READ_BASE}${path}`, { headers: { Authorization: `Bearer ${this.credential}`, Accept: 'application/json' }, cache: 'no-store' });
    const body = (await res.json().catch(() => undefined)) as { error?: { message?: string } } | undefined;
    if (!res.ok) throw new ApiError(res.status, body?.error?.message ?? `The server answered ${res.status}`);
    return body as T;
  }

  static session(credential: string): Promise<Session> {
    return new ReadApi(credential, '').get<Session>('/session');
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
