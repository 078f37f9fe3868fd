import { randomBytes } from 'node:crypto';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import { candidates, describeDifference, matches, MAX_UNKNOWNS_PER_DATASET, outcomeOf, unsettled, type Answer, type Candidates, type DatasetView, type Operation, type Outcome, type Sent } from './oracle';

/*
 * The fault tests' workload: many accounts, datasets with and without unique_by, appends (some with
 * delete_by, some of 500 records so the 5000-record window trims), replaces, a delete and a re-create with
 * another definition, and now and then an invalid request. Each dataset is one loop that sends its next
 * request only after the previous one's answer (so acknowledged order is well defined); all datasets run
 * at once. Every answer is recorded with its outcome (test/helpers/oracle.ts), and `verify` reads the
 * admin listener until what it shows equals the fold of the acknowledged requests, or fails with a diff.
 *
 * It talks to whatever serves the public API and the admin listener at the ports `target` shows at the
 * moment of each request (a restarted embedded server comes back on new ports). Loopback only.
 */

export interface Target {
  /** Public HTTPS port and the certificate to trust; admin port and token. Read before every request. */
  readonly port: number;
  readonly ca: string;
  readonly adminPort: number;
  readonly adminToken: string;
}

export interface WorkloadOptions {
  readonly target: Target;
  /** account → API key. */
  readonly keys: Readonly<Record<string, string>>;
  readonly datasetsPerAccount: number;
  /** Pause between two requests of one dataset (the load's pace). */
  readonly pauseMs?: number;
  /** A request without an answer by then counts as unknown. */
  readonly requestTimeoutMs?: number;
  /** Every n-th dataset appends 500 records at a time (crosses the 5000-record window); 0: none. */
  readonly heavyEvery?: number;
  /**
   * Every n-th dataset sends each request with an Idempotency-Key and sends it again with the key until its
   * outcome is known (test/helpers/oracle.ts); 0: none. Default 3.
   */
  readonly keyedEvery?: number;
}

type Kind = 'plain' | 'unique' | 'heavy';

interface DatasetLoop {
  readonly account: string;
  readonly key: string;
  readonly id: string;
  readonly kind: Kind;
  /** Sends every request with an Idempotency-Key, and again with it until answered. */
  readonly keyed: boolean;
  readonly sent: Sent[];
  /**
   * Where the script stands: `define` until a definition is acknowledged, `live` while the dataset exists,
   * `deleting` while a delete's outcome is open (the next request repeats it: 200, or 404 if it was applied).
   */
  stage: 'define' | 'live' | 'deleting';
  /** Requests sent since the last (re)definition; the script's clock. */
  step: number;
  variant: number;
  unknowns: number;
}

/** A deterministic sequence per dataset, so a failing run can be read back. */
function lcg(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

const day = (n: number): string => new Date(Date.UTC(2024, 0, 1 + n)).toISOString().slice(0, 10);

function definitionOf(kind: Kind, variant: number): Record<string, unknown> {
  // A re-created dataset gets another definition (one more field), so its old records cannot pass for new.
  const extra = variant % 2 === 1 ? { note: { type: 'string', name: 'Note', optional: true } } : {};
  if (kind === 'unique') {
    return { fields: { k: { type: 'string', name: 'Key' }, v: { type: 'number', name: 'Value' }, at: { type: 'datetime', name: 'At' }, ...extra }, unique_by: ['k'] };
  }
  return { fields: { day: { type: 'date', name: 'Day' }, n: { type: 'number', name: 'N' }, amount: { type: 'money', name: 'Amount', currency_code: 'EUR' }, label: { type: 'string', name: 'Label', optional: true }, ...extra } };
}

function recordsFor(kind: Kind, rnd: () => number, count: number, serial: number): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, i) => {
    if (kind === 'unique') {
      // A small key space, so appends merge into stored records and repeat keys within a request.
      return { k: `key-${Math.floor(rnd() * 40)}`, v: serial * 1000 + i, at: new Date(Date.UTC(2024, 0, 1) + Math.floor(rnd() * 1e9)).toISOString() };
    }
    const r: Record<string, unknown> = { day: day(Math.floor(rnd() * 60)), n: serial * 1000 + i, amount: Math.floor(rnd() * 1e6) };
    if (rnd() < 0.5) r.label = `l-${serial}-${i}`;
    return r;
  });
}

/** The next request of a dataset's script (deterministic in its seed and position). */
function nextOperation(ds: DatasetLoop, rnd: () => number, serial: number): Operation {
  if (ds.stage === 'define') return { kind: 'define', body: definitionOf(ds.kind, ds.variant) };
  if (ds.stage === 'deleting') return { kind: 'delete' };
  ds.step++;
  if (ds.step % 37 === 0) return { kind: 'delete' };
  const heavy = ds.kind === 'heavy';
  const count = heavy ? 500 : 1 + Math.floor(rnd() * 30);
  const data = recordsFor(ds.kind, rnd, count, serial);
  // An invalid record now and then: refused with a 400, never applied.
  if (rnd() < 0.03) data[Math.floor(rnd() * data.length)] = ds.kind === 'unique' ? { k: 1, v: 'x', at: 'yesterday' } : { day: 'soon', n: 'x', amount: 1.5 };
  if (ds.step % 13 === 0) return { kind: 'replace', body: { data } };
  const body: Record<string, unknown> = { data };
  if (ds.kind !== 'unique' && rnd() < 0.3) body.delete_by = 'day';
  return { kind: 'append', body };
}

/**
 * The answers a request may end on while a component is killed or rolled: the API's own answers, the
 * failures whose outcome is unknown to the client (no answer, a reset, a 503, a 500 outcome_unknown), and a
 * keyed request still told its key is in flight when the load stopped. Anything else (a 500 "internal",
 * say) is a bug of its own.
 */
export const FAULT_ANSWERS = /^(200|201|400 invalid|404 not_found|503 |500 outcome_unknown|409 idempotency_in_flight|ECONNRESET|ECONNREFUSED|reset mid-answer|socket hang up|timeout)/;

export interface Tally {
  readonly requests: number;
  readonly acknowledged: number;
  readonly refused: number;
  readonly unknown: number;
  /** "503 unavailable", "500 outcome_unknown", "reset", … → count. */
  readonly answers: Record<string, number>;
  /** Keyed requests sent more than once, and their attempts beyond the first. */
  readonly retried: number;
  readonly retries: number;
  /** Keyed requests answered 422 (their key "used for another request"): a retry was taken for a new request. */
  readonly keyMismatches: number;
}

export class FaultWorkload {
  readonly datasets: DatasetLoop[] = [];
  private agent: Agent;
  private running: Promise<void>[] = [];
  private stopping = false;
  private readonly pauseMs: number;
  private readonly timeoutMs: number;
  private serial = 0;
  /** Resolvers waiting for the next answer (waitFor). */
  private waiters: (() => void)[] = [];

  constructor(private readonly opts: WorkloadOptions) {
    this.pauseMs = opts.pauseMs ?? 20;
    this.timeoutMs = opts.requestTimeoutMs ?? 30_000;
    // Keep-alive: a fresh TLS handshake per request would be most of the load on a 2-core machine.
    this.agent = new Agent({ keepAlive: true, maxSockets: 64 });
    const heavyEvery = opts.heavyEvery ?? 7;
    const keyedEvery = opts.keyedEvery ?? 3;
    let n = 0;
    for (const [account, key] of Object.entries(opts.keys)) {
      for (let d = 0; d < opts.datasetsPerAccount; d++, n++) {
        const kind: Kind = heavyEvery > 0 && n % heavyEvery === heavyEvery - 1 ? 'heavy' : n % 2 === 0 ? 'plain' : 'unique';
        const keyed = keyedEvery > 0 && n % keyedEvery === 0;
        this.datasets.push({ account, key, id: `${kind}${keyed ? '-keyed' : ''}-${d}-${randomBytes(3).toString('hex')}`, kind, keyed, sent: [], stage: 'define', step: 0, variant: 0, unknowns: 0 });
      }
    }
  }

  /** Starts every dataset's loop; they run until `stop`. */
  start(): void {
    this.running = this.datasets.map((ds, i) => this.loop(ds, lcg(0x9e3779b9 ^ (i * 2654435761))));
  }

  /** Lets each loop finish the request it has in flight, then returns. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
    this.agent.destroy();
  }

  /**
   * After stop(): sends every keyed request that kept its key — acknowledged with a 201 create, or a 200
   * write or delete (a create that found its dataset, 200, keeps none) — again with its key and the same
   * bytes, until answered (a 503 or 409 is sent again), and lists those whose answer is not a replay
   * (`Idempotent-Replayed: true`) of their acknowledged status. A resend applied again would also show
   * in verify(): the state would no longer be the fold of what was sent.
   */
  async resendKeyed(timeoutMs: number): Promise<{ sent: number; notReplayed: string[] }> {
    if (!this.stopping) throw new Error('resendKeyed: stop() the load first');
    const deadline = Date.now() + timeoutMs;
    this.agent = new Agent({ keepAlive: true, maxSockets: 16 });
    let sent = 0;
    const notReplayed: string[] = [];
    try {
      await Promise.all(
        this.datasets.map(async (ds) => {
          for (const s of ds.sent) {
            const status = s.answer.status;
            if (s.key === undefined || s.outcome !== 'acknowledged' || !(status === 201 || (status === 200 && s.op.kind !== 'define'))) continue;
            sent++;
            let answer = await this.send(ds, s.op, s.key);
            while (unsettled(answer) && Date.now() < deadline) {
              await new Promise((r) => setTimeout(r, 250));
              answer = await this.send(ds, s.op, s.key);
            }
            if (answer.status !== status || answer.replayed !== true) notReplayed.push(`${ds.account}/${ds.id} ${s.op.kind} (key ${s.key}, first ${status}): ${JSON.stringify(answer)}`);
          }
        }),
      );
    } finally {
      this.agent.destroy();
    }
    return { sent, notReplayed };
  }

  tally(): Tally {
    const all = this.datasets.flatMap((d) => d.sent);
    const answers: Record<string, number> = {};
    for (const s of all) {
      const k = s.answer.status === undefined ? (s.answer.code ?? 'no answer') : `${s.answer.status}${s.answer.code === undefined ? '' : ` ${s.answer.code}`}`;
      answers[k] = (answers[k] ?? 0) + 1;
    }
    const count = (o: Outcome): number => all.filter((s) => s.outcome === o).length;
    const retried = all.filter((s) => (s.attempts?.length ?? 1) > 1);
    return {
      requests: all.length,
      acknowledged: count('acknowledged'),
      refused: count('refused'),
      unknown: count('unknown'),
      answers,
      retried: retried.length,
      retries: retried.reduce((n, s) => n + (s.attempts?.length ?? 1) - 1, 0),
      keyMismatches: all.filter((s) => s.attempts?.some((a) => a.status === 422) === true).length,
    };
  }

  /** Resolves once `predicate` holds of the tally (checked after every answer); fails after `timeoutMs`. */
  async waitFor(predicate: (t: Tally) => boolean, timeoutMs: number, what: string): Promise<Tally> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const t = this.tally();
      if (predicate(t)) return t;
      if (Date.now() > deadline) throw new Error(`workload: ${what} not reached within ${timeoutMs} ms; ${JSON.stringify(t)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 500);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  private async loop(ds: DatasetLoop, rnd: () => number): Promise<void> {
    while (!this.stopping) {
      // Past the oracle's bound a dataset says nothing more that the oracle could judge.
      if (ds.unknowns >= MAX_UNKNOWNS_PER_DATASET) return;
      const serial = this.serial++;
      const op = nextOperation(ds, rnd, serial);
      let answer: Answer;
      let attempts: Answer[] | undefined;
      if (ds.keyed) {
        // One key per request; sent again with it until the answer tells what became of the request.
        const key = `${ds.id}-${serial}`;
        attempts = [await this.send(ds, op, key)];
        while (unsettled(attempts.at(-1)!) && !this.stopping) {
          await new Promise((r) => setTimeout(r, attempts!.at(-1)!.status === 409 ? 1000 : 250));
          attempts.push(await this.send(ds, op, key));
        }
        answer = attempts.at(-1)!;
      } else answer = await this.send(ds, op);
      // A keyed request left unsettled when the load stopped may have been applied by an earlier attempt.
      const outcome = attempts !== undefined && unsettled(answer) ? 'unknown' : outcomeOf(answer);
      ds.sent.push({ op, answer, outcome, ...(attempts === undefined ? {} : { attempts, key: `${ds.id}-${serial}` }) });
      if (outcome === 'unknown') ds.unknowns++;
      advance(ds, op, answer, outcome);
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w();
      // Back off while something is down, so a fault does not turn the load into a busy loop.
      await new Promise((r) => setTimeout(r, outcome === 'acknowledged' || answer.status === 400 ? this.pauseMs : 250));
    }
  }

  private send(ds: DatasetLoop, op: Operation, idempotencyKey?: string): Promise<Answer> {
    const path = op.kind === 'define' || op.kind === 'delete' ? `/datasets/${ds.id}` : `/datasets/${ds.id}/data`;
    const method = op.kind === 'append' ? 'POST' : op.kind === 'delete' ? 'DELETE' : 'PUT';
    const payload = op.kind === 'delete' ? undefined : JSON.stringify(op.body);
    const t = this.opts.target;
    return new Promise<Answer>((resolve) => {
      const req = httpsRequest(
        {
          host: '127.0.0.1',
          port: t.port,
          method,
          path,
          agent: this.agent,
          ca: t.ca,
          servername: 'localhost',
          timeout: this.timeoutMs,
          headers: {
            authorization: `Basic ${Buffer.from(`${ds.key}:`).toString('base64')}`,
            ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
            ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) }),
          },
        },
        (res: IncomingMessage) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            let code: string | undefined;
            try {
              code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: string } }).error?.code;
            } catch {
              code = undefined;
            }
            resolve({ status: res.statusCode, ...(code === undefined ? {} : { code }), ...(res.headers['idempotent-replayed'] === 'true' ? { replayed: true } : {}) });
          });
          // The connection broke in the middle of the answer: its status said something, but not all of it.
          res.on('error', () => resolve({ status: undefined, code: 'reset mid-answer' }));
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (e: NodeJS.ErrnoException) => resolve(refusedConnection(e) ? { status: 503, code: `not sent (${e.code})` } : { status: undefined, code: e.code ?? e.message }));
      req.end(payload);
    });
  }

  /**
   * Reads the admin listener until every dataset shows one of its candidate states and each account's
   * listing holds exactly the datasets that should exist; fails after `timeoutMs` with the differences.
   */
  async verify(timeoutMs: number): Promise<{ datasets: number; records: number; unknowns: number; ms: number }> {
    const started = Date.now();
    const expected = new Map<DatasetLoop, Candidates>();
    for (const ds of this.datasets) expected.set(ds, candidates(ds.account, ds.id, ds.sent));
    let problems: string[];
    const mismatched = this.datasets.flatMap((d) => d.sent.filter((s) => s.attempts?.some((a) => a.status === 422) === true).map((s) => `${d.account}/${d.id}: ${s.op.kind} got 422 on a retry with its own key`));
    for (;;) {
      problems = [...mismatched];
      let records = 0;
      const accounts = [...new Set(this.datasets.map((d) => d.account))];
      for (const account of accounts) {
        const listing = await this.admin(`/admin/accounts/${account}/datasets`);
        if (listing.status !== 200) {
          problems.push(`listing of ${account}: ${listing.status} ${listing.text.slice(0, 200)}`);
          continue;
        }
        const listed = new Map((listing.body as { datasets: { id: string; fields: DatasetView['fields']; unique_by: string[]; record_count: number }[] }).datasets.map((d) => [d.id, d]));
        for (const ds of this.datasets.filter((d) => d.account === account)) {
          const c = expected.get(ds)!;
          const entry = listed.get(ds.id);
          listed.delete(ds.id);
          let visible: DatasetView | undefined;
          if (entry !== undefined) {
            const res = await this.admin(`/admin/accounts/${account}/datasets/${encodeURIComponent(ds.id)}/records`);
            if (res.status !== 200) {
              problems.push(`records of ${account}/${ds.id}: ${res.status} ${res.text.slice(0, 200)}`);
              continue;
            }
            const shown = (res.body as { records: DatasetView['records'] }).records;
            if (shown.length !== entry.record_count) problems.push(`${account}/${ds.id}: listing says ${entry.record_count} records, records shows ${shown.length}`);
            visible = { fields: entry.fields, unique_by: entry.unique_by, records: shown };
            records += shown.length;
          }
          if (!matches(visible, c)) problems.push(describeDifference(`${account}/${ds.id}`, visible, c));
        }
        for (const id of listed.keys()) problems.push(`${account}/${id}: listed, but the workload never made it`);
      }
      if (problems.length === 0) {
        return { datasets: this.datasets.length, records, unknowns: [...expected.values()].reduce((n, c) => n + c.unknowns, 0), ms: Date.now() - started };
      }
      if (Date.now() - started >= timeoutMs) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error(`the visible state is not the fold of the acknowledged requests after ${timeoutMs} ms (${problems.length} problems):\n${problems.slice(0, 12).join('\n')}`);
  }

  /** A GET on the admin listener with the token. */
  admin(path: string): Promise<{ status: number; text: string; body: unknown }> {
    const t = this.opts.target;
    return new Promise((resolve) => {
      const req = httpRequest({ host: '127.0.0.1', port: t.adminPort, path, method: 'GET', timeout: 30_000, headers: { authorization: `Bearer ${t.adminToken}` } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 0, text, body });
        });
        res.on('error', (e) => resolve({ status: 0, text: String(e), body: undefined }));
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (e) => resolve({ status: 0, text: String(e), body: undefined }));
      req.end();
    });
  }
}

/** Moves a dataset's script on after an answer. */
function advance(ds: DatasetLoop, op: Operation, answer: Answer, outcome: Outcome): void {
  if (op.kind === 'define') {
    // A refused or unknown create is sent again: find-or-create answers 200 if the first one was applied.
    if (outcome === 'acknowledged') ds.stage = 'live';
    return;
  }
  if (op.kind !== 'delete') return;
  if (outcome === 'unknown') ds.stage = 'deleting';
  // 404 to a repeated delete: the unknown one was applied.
  else if (outcome === 'acknowledged' || (ds.stage === 'deleting' && answer.status === 404)) {
    ds.stage = 'define';
    ds.variant++;
    ds.step = 0;
  }
}

/** A connection that was never made: the request cannot have reached the server. */
function refusedConnection(e: NodeJS.ErrnoException): boolean {
  return e.code === 'ECONNREFUSED';
}
