/*
 * The Node.js pushbase runs on is one line, pinned once (scripts/ensure-node.js): package.json's engines
 * says it, the commands that run tests or servers go through ensure-node, the image's base is of the same
 * major, and every node process a test starts is the test's own runtime (process.execPath), never a `node`
 * found on PATH.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '..', '..');
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a plain CommonJS script (it runs before npm ci)
const ensureNode = require('../../scripts/ensure-node.js') as { NODE_VERSION: string; NODE_MAJOR: number; satisfies: (version: string) => boolean };
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { engines: { node: string }; scripts: Record<string, string> };

test("package.json's engines is the pinned release and later ones of its major", () => {
  expect(pkg.engines.node).toBe(`^${ensureNode.NODE_VERSION}`);
  const [major, minor, patch] = ensureNode.NODE_VERSION.split('.').map(Number) as [number, number, number];
  expect(ensureNode.satisfies(ensureNode.NODE_VERSION)).toBe(true);
  expect(ensureNode.satisfies(`v${major}.${minor}.${patch + 1}`)).toBe(true);
  expect(ensureNode.satisfies(`${major}.${minor + 1}.0`)).toBe(true);
  expect(ensureNode.satisfies(`${major}.${minor}.${patch - 1}`)).toBe(patch === 0);
  expect(ensureNode.satisfies(`${major}.0.0`)).toBe(minor === 0 && patch === 0);
  expect(ensureNode.satisfies(`${major + 1}.0.0`)).toBe(false);
  expect(ensureNode.satisfies('20.20.2')).toBe(false);
});

test('the tests and the servers npm starts run through scripts/ensure-node.js', () => {
  for (const name of ['pretest', 'test', 'test:unit', 'test:contract', 'test:int', 'test:e2e', 'test:e2e-distributed', 'prestart', 'start', 'prestart:distributed', 'start:distributed']) {
    expect(`${name}: ${pkg.scripts[name]}`).toMatch(new RegExp(`^${name}: node scripts/ensure-node\\.js `));
  }
});

test("the image's base is of the same major", () => {
  const dockerfile = readFileSync(path.join(root, 'deploy', 'Dockerfile'), 'utf8');
  const base = /\bnode:(\d+)\.\d+\.\d+/.exec(dockerfile);
  expect(base).not.toBeNull();
  expect(Number(base![1])).toBe(ensureNode.NODE_MAJOR);
});

test('the tests start node as process.execPath, never as a `node` looked up on PATH', () => {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === 'fixtures') continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|js)$/.test(entry.name)) files.push(full);
    }
  };
  walk(path.join(root, 'test'));
  for (const service of readdirSync(path.join(root, 'services'))) {
    const dir = path.join(root, 'services', service, 'test');
    if (readdirSync(path.join(root, 'services', service)).includes('test')) walk(dir);
  }
  expect(files.length).toBeGreaterThan(50);
  const bare = /\b(?:spawn|spawnSync|execFile|execFileSync|fork)\(\s*['"`]node['"`]/;
  expect(files.filter((f) => bare.test(readFileSync(f, 'utf8'))).map((f) => path.relative(root, f))).toEqual([]);
});
