import { BarController, BarElement, CategoryScale, Chart, LinearScale, LineController, LineElement, PointElement, Tooltip } from 'chart.js';
import { ApiError, ReadApi, type DatasetListing } from './api';
import { aggregateQuery, byFields, cellText, chartPlan, valueFields, type Bucket, type ChartPlan } from './chart-plan';

/*
 * The dataset browser (docs/browser.md): sign in, the account's datasets, one dataset's schema, newest
 * records and a chart. It polls the read API once a second (a listing is one small read; server-sent events
 * would need a stream per open page through every proxy and load balancer in front), and redraws a dataset
 * only when its listing says it changed (record count or last update), so a push shows within about a
 * second plus the projector's delay in distributed mode. No framework: three views and a few tables.
 */

Chart.register(BarController, BarElement, CategoryScale, LinearScale, LineController, LineElement, PointElement, Tooltip);

const POLL_MS = 1000;
const NEWEST = 20;
const STORE = 'pushbase.session';

const $ = <T extends HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`#${id} is missing from the page`);
  return el as T;
};

const el = {
  who: $('who'),
  signOut: $<HTMLButtonElement>('sign-out'),
  signIn: $('sign-in'),
  signInForm: $<HTMLFormElement>('sign-in-form'),
  credential: $<HTMLInputElement>('credential'),
  account: $<HTMLInputElement>('account'),
  signInError: $('sign-in-error'),
  datasets: $('datasets'),
  datasetsEmpty: $('datasets-empty'),
  datasetsBody: $('datasets-table').querySelector('tbody') as HTMLTableSectionElement,
  dataset: $('dataset'),
  title: $('dataset-title'),
  summary: $('dataset-summary'),
  back: $<HTMLAnchorElement>('back'),
  chartForm: $('chart-form'),
  chartValue: $<HTMLSelectElement>('chart-value'),
  chartBy: $<HTMLSelectElement>('chart-by'),
  chartBucket: $<HTMLSelectElement>('chart-bucket'),
  chartNone: $('chart-none'),
  canvas: $<HTMLCanvasElement>('chart'),
  chartTableKey: $('chart-table-key'),
  chartTableValue: $('chart-table-value'),
  chartTableBody: $('chart-table').querySelector('tbody') as HTMLTableSectionElement,
  recordsHead: $('records-table').querySelector('thead') as HTMLTableSectionElement,
  recordsBody: $('records-table').querySelector('tbody') as HTMLTableSectionElement,
  schemaBody: $('schema-table').querySelector('tbody') as HTMLTableSectionElement,
  status: $('status'),
};

let api: ReadApi | undefined;
let listing: DatasetListing[] = [];
/** The open dataset's id and the listing entry it was last drawn from. */
let open: { id: string; drawn: string | undefined } | undefined;
let wanted: Partial<Pick<ChartPlan, 'value' | 'by' | 'bucket'>> = {};
let chart: { readonly chart: Chart; readonly kind: ChartPlan['kind'] } | undefined;
let timer: number | undefined;
let polling = false;

function row(cells: readonly (string | { text: string; num?: boolean })[], header = false): HTMLTableRowElement {
  const tr = document.createElement('tr');
  for (const c of cells) {
    const td = document.createElement(header ? 'th' : 'td');
    if (header) td.setAttribute('scope', 'col');
    const { text, num } = typeof c === 'string' ? { text: c, num: false } : c;
    td.textContent = text;
    if (num === true) td.className = 'num';
    tr.append(td);
  }
  return tr;
}

function show(view: 'sign-in' | 'datasets' | 'dataset'): void {
  el.signIn.hidden = view !== 'sign-in';
  el.datasets.hidden = view !== 'datasets';
  el.dataset.hidden = view !== 'dataset';
  el.who.hidden = view === 'sign-in';
  el.signOut.hidden = view === 'sign-in';
}

function fail(e: unknown): void {
  if (e instanceof ApiError && (e.status === 401 || e.status === 403)) {
    signOut(e.message);
    return;
  }
  el.status.textContent = e instanceof Error ? e.message : String(e);
}

// ── Sign in ──

async function signIn(credential: string, account: string): Promise<void> {
  const { session, authorization } = await ReadApi.session(credential);
  const acc = session.account ?? account;
  if (acc === '') throw new ApiError(400, 'The admin token names no account: enter the account to look at.');
  api = new ReadApi(authorization, acc);
  // For this tab only (sessionStorage), so a reload keeps the user signed in and closing the tab forgets it.
  sessionStorage.setItem(STORE, JSON.stringify({ credential, account: acc }));
  el.who.textContent = `${session.admin ? 'Admin token' : session.scope === 'read' ? 'Read-only key' : 'Write key'} · account ${acc}`;
  el.status.textContent = '';
  await poll();
  route();
  timer ??= window.setInterval(() => void poll(), POLL_MS);
}

function signOut(message = ''): void {
  sessionStorage.removeItem(STORE);
  api = undefined;
  open = undefined;
  if (timer !== undefined) window.clearInterval(timer);
  timer = undefined;
  el.credential.value = '';
  el.signInError.textContent = message;
  show('sign-in');
  el.credential.focus();
}

el.signInForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  el.signInError.textContent = '';
  const credential = el.credential.value.trim();
  if (credential === '') {
    el.signInError.textContent = 'Enter a key or the admin token.';
    el.credential.focus();
    return;
  }
  signIn(credential, el.account.value.trim()).catch((e: unknown) => {
    el.signInError.textContent = e instanceof Error ? e.message : String(e);
  });
});
el.signOut.addEventListener('click', () => signOut());

// ── The datasets ──

function drawListing(): void {
  el.datasetsEmpty.hidden = listing.length > 0;
  el.datasetsBody.replaceChildren(
    ...listing.map((d) => {
      const tr = row([d.id, { text: d.record_count.toLocaleString('en-US'), num: true }, new Date(d.updated_at).toLocaleString()]);
      tr.tabIndex = 0;
      tr.setAttribute('aria-label', `Open dataset ${d.id}`);
      tr.dataset['id'] = d.id;
      return tr;
    }),
  );
}

const openRow = (target: EventTarget | null): void => {
  const tr = (target as HTMLElement | null)?.closest('tr');
  const id = tr?.dataset['id'];
  if (id !== undefined) location.hash = `#/d/${encodeURIComponent(id)}`;
};
el.datasetsBody.addEventListener('click', (ev) => openRow(ev.target));
el.datasetsBody.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' || ev.key === ' ') {
    ev.preventDefault();
    openRow(ev.target);
  }
});
el.back.addEventListener('click', (ev) => {
  ev.preventDefault();
  location.hash = '#/';
});

// ── One dataset ──

function fillSelect(select: HTMLSelectElement, keys: readonly string[], d: DatasetListing, chosen: string): void {
  select.replaceChildren(
    ...keys.map((k) => {
      const o = document.createElement('option');
      o.value = k;
      o.textContent = `${d.fields[k]?.name ?? k} (${k})`;
      o.selected = k === chosen;
      return o;
    }),
  );
}

async function drawDataset(d: DatasetListing): Promise<void> {
  if (api === undefined) return;
  el.title.textContent = d.id;
  el.summary.textContent = `${d.record_count.toLocaleString('en-US')} records · last update ${new Date(d.updated_at).toLocaleString()}`;
  const keys = Object.keys(d.fields);
  el.schemaBody.replaceChildren(
    ...keys.map((k) => {
      const f = d.fields[k]!;
      return row([k, f.name, f.type, f.optional === true ? 'yes' : 'no', d.unique_by.includes(k) ? 'yes' : 'no']);
    }),
  );

  // The newest records: the last page of insertion order, shown newest first.
  const page = await api.records(d.id, Math.max(0, d.record_count - NEWEST), NEWEST);
  el.recordsHead.replaceChildren(row(keys.map((k) => d.fields[k]?.name ?? k), true));
  el.recordsBody.replaceChildren(...[...page.records].reverse().map((r) => row(keys.map((k) => ({ text: cellText(d.fields[k]!.type, r[k]), num: typeof r[k] === 'number' })))));

  const plan = chartPlan(d.fields, wanted);
  el.chartNone.hidden = plan !== undefined;
  el.chartForm.hidden = plan === undefined;
  el.canvas.parentElement!.hidden = plan === undefined;
  if (plan === undefined) {
    chart?.chart.destroy();
    chart = undefined;
    el.chartTableBody.replaceChildren();
    return;
  }
  fillSelect(el.chartValue, valueFields(d.fields), d, plan.value);
  fillSelect(el.chartBy, byFields(d.fields), d, plan.by);
  el.chartBucket.value = plan.bucket;
  el.chartBucket.disabled = plan.kind !== 'line';
  const { groups } = await api.aggregate(d.id, aggregateQuery(plan));
  const labels = groups.map((g) => g.key ?? '(none)');
  const values = groups.map((g) => g.value);
  const valueName = d.fields[plan.value]?.name ?? plan.value;
  const byName = d.fields[plan.by]?.name ?? plan.by;
  const description = `${plan.kind === 'line' ? 'Line' : 'Bar'} chart: sum of ${valueName} by ${byName}${plan.kind === 'line' ? ` per ${plan.bucket}` : ''}, ${groups.length} points`;
  el.canvas.setAttribute('aria-label', description);
  el.chartTableKey.textContent = plan.kind === 'line' ? `${byName} (${plan.bucket})` : byName;
  el.chartTableValue.textContent = `Sum of ${valueName}`;
  el.chartTableBody.replaceChildren(...groups.map((g) => row([g.key ?? '(none)', { text: cellText(d.fields[plan.value]!.type, g.value), num: true }])));
  if (chart !== undefined && chart.kind !== plan.kind) {
    chart.chart.destroy();
    chart = undefined;
  }
  if (chart === undefined) {
    chart = {
      kind: plan.kind,
      chart: new Chart(el.canvas, {
        type: plan.kind,
        data: { labels, datasets: [{ label: `Sum of ${valueName}`, data: values, borderColor: '#2563eb', backgroundColor: 'rgba(37, 99, 235, 0.5)' }] },
        options: { responsive: true, maintainAspectRatio: false, animation: false, scales: { y: { beginAtZero: true } } },
      }),
    };
  } else {
    chart.chart.data.labels = labels;
    const set = chart.chart.data.datasets[0]!;
    set.data = values;
    set.label = `Sum of ${valueName}`;
    chart.chart.update();
  }
}

for (const select of [el.chartValue, el.chartBy, el.chartBucket]) {
  select.addEventListener('change', () => {
    wanted = { value: el.chartValue.value, by: el.chartBy.value, bucket: el.chartBucket.value as Bucket };
    if (open !== undefined) open.drawn = undefined;
    void poll();
  });
}

// ── Routing and polling ──

function route(): void {
  if (api === undefined) return;
  const m = /^#\/d\/(.+)$/.exec(location.hash);
  if (m === null) {
    open = undefined;
    show('datasets');
    drawListing();
    return;
  }
  const id = decodeURIComponent(m[1]!);
  if (open?.id !== id) {
    open = { id, drawn: undefined };
    wanted = {};
  }
  show('dataset');
  void poll();
}
window.addEventListener('hashchange', route);

async function poll(): Promise<void> {
  if (api === undefined || polling) return;
  polling = true;
  try {
    listing = await api.datasets();
    if (open === undefined) {
      drawListing();
    } else {
      const d = listing.find((x) => x.id === open?.id);
      if (d === undefined) {
        el.title.textContent = open.id;
        el.summary.textContent = 'This dataset does not exist (any more).';
        open.drawn = undefined;
      } else {
        const version = `${d.updated_at}/${d.record_count}`;
        if (open.drawn !== version) {
          await drawDataset(d);
          open.drawn = version;
        }
      }
    }
    el.status.textContent = `Updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    fail(e);
  } finally {
    polling = false;
  }
}

// ── Start ──

const saved = sessionStorage.getItem(STORE);
if (saved === null) {
  show('sign-in');
} else {
  const { credential, account } = JSON.parse(saved) as { credential: string; account: string };
  signIn(credential, account).catch((e: unknown) => signOut(e instanceof Error ? e.message : String(e)));
}
