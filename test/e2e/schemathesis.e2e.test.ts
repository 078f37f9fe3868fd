import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isObject, loadOpenApiDocument, OPENAPI_PATH, resolvePointer } from '../helpers/openapi';
import { ROOT, TestServer } from '../helpers/server';
import { ANY_BODY, expectOk, uid, UNLIMITED } from './support';

/*
 * schemathesis, run from docs/openapi.yaml as a new user would, against the live server over HTTPS on
 * loopback, with every check but positive_data_acceptance (test/schemathesis/schemathesis.toml says why):
 * a 5xx, a status, content type, header or body the document does not promise, a request the document
 * calls invalid that the server takes, a route that ignores its auth or a missing method's 405. Any
 * failure it reports fails this test, which prints schemathesis's report. Bounded: max-examples per
 * operation (the config), one worker, and a wall-time deadline after which the run is stopped and fails.
 *
 * Two runs. The whole API first. Then the two record operations against one existing dataset, created
 * with the document's own example definition: on a dataset that does not exist every request is 404,
 * whatever its body, so without it the body rules of append and replace (records, delete_by, deleteBy)
 * are never reached; with it, every body schemathesis derives from the document's example differs from a
 * valid request in one place, which the server must refuse when the document says it is invalid.
 *
 * It runs in both modes, as every suite of test/e2e does: the distributed gateway answers through the gRPC
 * services and their error mapping, which could drift from the document on their own. Both runs use
 * every phase schemathesis has (examples, coverage, fuzzing, stateful) at 200 examples an operation, and
 * each run also fails when a process of the server died or was restarted under it.
 *
 * schemathesis is a pinned Python tool in a virtualenv of its own (scripts/ensure-schemathesis.js), which
 * jest's global setup provisions before any suite runs and names in PUSHBASE_SCHEMATHESIS_PYTHON.
 */

const CONFIG = path.join(ROOT, 'test/schemathesis/schemathesis.toml');
/** A run takes about 10 s alone on two cores; a busy machine may take several times that. */
const RUN_DEADLINE_MS = 240_000;
/** Same cases every run, so CI fails on drift in the code, not on the luck of the draw; override to explore. */
const SEED = process.env.PUSHBASE_SCHEMATHESIS_SEED ?? '1';

interface StReport {
  readonly exit_code: number;
  readonly complete: boolean;
  readonly stop_reason: string;
  readonly operations: { readonly total: number; readonly selected: number; readonly tested: number; readonly errored: number };
  readonly test_cases: { readonly generated: number; readonly with_failures: number; readonly errored: number };
  readonly failures: readonly unknown[];
  readonly errors: readonly unknown[];
  readonly valid_rates: Record<string, Record<string, { readonly accepted: number }>>;
}

interface StRun {
  readonly code: number | null;
  /** schemathesis's own report, as it prints it. */
  readonly text: string;
  readonly report: StReport | undefined;
}

let server: TestServer;
let workDir: string;

beforeAll(async () => {
  // Past the 60-per-minute rule and the per-address limit on failed authentications, both of which the
  // fuzzing would reach; the 429s are documented, but they would hide every other answer.
  server = await new TestServer({ env: { ...UNLIMITED, PUSHBASE_AUTH_FAILURES_PER_MINUTE: '100000' } }).start();
  workDir = mkdtempSync(path.join(process.env.PUSHBASE_TEST_TMP ?? os.tmpdir(), 'pushbase-schemathesis-'));
});
afterAll(async () => {
  await server.stop();
});

/** Runs schemathesis with `config` and the extra arguments; stops it at the deadline. */
async function schemathesis(name: string, config: string, args: readonly string[]): Promise<StRun> {
  const python = process.env.PUSHBASE_SCHEMATHESIS_PYTHON;
  if (python === undefined || !existsSync(python)) {
    throw new Error(`no schemathesis (PUSHBASE_SCHEMATHESIS_PYTHON is ${python ?? 'unset'}): ${process.env.PUSHBASE_SCHEMATHESIS_ERROR ?? "jest's global setup provisions it with scripts/ensure-schemathesis.js"}`);
  }
  const reportPath = path.join(workDir, `${name}.json`);
  const child = spawn(
    python,
    ['-m', 'schemathesis.cli', '--config-file', config, 'run', OPENAPI_PATH, '--seed', SEED, '--no-color', '--report', 'json', '--report-json-path', reportPath, ...args],
    {
      // Hypothesis and schemathesis write their working folders into the current directory: not the repository.
      cwd: workDir,
      env: { ...process.env, PUSHBASE_ST_URL: server.baseUrl, PUSHBASE_ST_CA: server.certFile, PUSHBASE_ST_KEY: server.keys.acme!, COLUMNS: '160' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const out: string[] = [];
  child.stdout.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr.on('data', (d: Buffer) => out.push(d.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, RUN_DEADLINE_MS);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (c) => resolve(c));
  }).finally(() => clearTimeout(timer));
  if (timedOut) throw new Error(`schemathesis (${name}) did not finish in ${RUN_DEADLINE_MS / 1000} s; it printed:\n${out.join('')}`);
  const report = existsSync(reportPath) ? (JSON.parse(readFileSync(reportPath, 'utf8')) as StReport) : undefined;
  return { code, text: out.join(''), report };
}

/**
 * What is wrong with a run, or nothing: schemathesis found no failure and no error, and the run was real
 * (it finished, tested every selected operation, and the server took some requests of each, so the key,
 * the certificate and the URL all worked).
 */
function problemsOf(run: StRun, operations: readonly string[], minimumCases: number): string[] {
  const r = run.report;
  if (r === undefined) return [`no JSON report (exit ${run.code})`];
  const problems: string[] = [];
  if (run.code !== 0 || r.exit_code !== 0) problems.push(`exit code ${run.code}`);
  if (!r.complete || r.stop_reason !== 'completed') problems.push(`stopped: ${r.stop_reason}`);
  if (r.failures.length > 0) problems.push(`${r.failures.length} kind(s) of failure in ${r.test_cases.with_failures} test case(s)`);
  if (r.errors.length > 0 || r.operations.errored > 0 || r.test_cases.errored > 0) problems.push(`errors: ${JSON.stringify(r.errors)}`);
  if (r.operations.tested !== operations.length) problems.push(`tested ${r.operations.tested} operations, not ${operations.length}`);
  // The depth the configuration asks for really ran (a setting schemathesis ignored would leave it shallow).
  if (r.test_cases.generated < minimumCases) problems.push(`only ${r.test_cases.generated} test cases, fewer than ${minimumCases}`);
  for (const op of operations) {
    const accepted = Object.values(r.valid_rates[op] ?? {}).reduce((n, phase) => n + phase.accepted, 0);
    if (accepted === 0) problems.push(`${op}: the server took no request at all`);
  }
  return problems;
}

function expectClean(run: StRun, operations: readonly string[], before: Record<string, number | undefined>): void {
  const problems = problemsOf(run, operations, MIN_CASES_PER_OPERATION * operations.length);
  // A 5xx is one failure; a process that died (or was restarted) under the fuzzing is another.
  const after = server.runningProcesses();
  if (JSON.stringify(after) !== JSON.stringify(before)) problems.push(`processes before ${JSON.stringify(before)}, after ${JSON.stringify(after)}`);
  if (problems.length > 0) throw new Error(`schemathesis: ${problems.join('; ')}\n\n${run.text}`);
  expect(problems).toEqual([]);
}

/** Test cases an operation gets at least, every phase together, at the configured depth. */
const MIN_CASES_PER_OPERATION = 150;
const ALL_OPERATIONS = ['GET /', 'PUT /datasets/{id}', 'DELETE /datasets/{id}', 'POST /datasets/{id}/data', 'PUT /datasets/{id}/data'];
const RECORD_OPERATIONS = ['POST /datasets/{id}/data', 'PUT /datasets/{id}/data'];

it(
  'finds nothing wrong with any operation',
  async () => {
    const before = server.runningProcesses();
    expectClean(await schemathesis('api', CONFIG, []), ALL_OPERATIONS, before);
  },
  2 * RUN_DEADLINE_MS,
);

it(
  'finds nothing wrong with append and replace on an existing dataset',
  async () => {
    // The document's find-or-create example, the definition its append example's record fits.
    const example = resolvePointer(loadOpenApiDocument(), '#/paths/~1datasets~1{id}/put/requestBody/content/application~1json/examples/sales/value');
    if (!isObject(example)) throw new Error('docs/openapi.yaml has no find-or-create example "sales"');
    const id = uid('schemathesis');
    expectOk(await server.request('PUT', `/datasets/${id}`, { key: server.keys.acme!, body: example }), 201, ANY_BODY);
    // The record operations' id pinned to that dataset. Only for this run: with DELETE in the run, the
    // pinned id would be deleted too and everything after it answered 404.
    const config = path.join(workDir, 'records.toml');
    writeFileSync(config, `${readFileSync(CONFIG, 'utf8')}\n[[operations]]\ninclude-path-regex = "/data$"\nparameters = { "path.id" = "${id}" }\n`);
    const before = server.runningProcesses();
    expectClean(await schemathesis('records', config, ['--include-path-regex', '/data$']), RECORD_OPERATIONS, before);
  },
  2 * RUN_DEADLINE_MS,
);
