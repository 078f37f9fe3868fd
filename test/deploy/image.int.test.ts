/*
 * deploy/Dockerfile built for real, without a Docker engine, so it cannot rot: deploy/image/build.ts runs
 * podman on a local stand-in of the Dockerfile's base (Debian minbase + the official Node binary of the
 * same major), which jest's global setup provisions once per machine (scripts/ensure-image-tools.js).
 * Then the image itself, run by podman without a network: the CLI answers as its entry point, on Node of
 * the Dockerfile's major, as uid 1000, with production dependencies only; `pushbase serve` starts on a
 * read-only root filesystem, writing only to its data directory and /tmp (as the Helm chart runs it), answers
 * GET /healthz on its admin port and HTTPS on its public port, and exits 0 on SIGTERM. The docker-archive
 * the Kubernetes tests import is checked too.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { buildImage, podman, podmanOk, root, type BuiltImage } from '../../deploy/image/build';

const BUILD_TIMEOUT = 40 * 60_000;
const dockerfile = readFileSync(path.join(root, 'deploy', 'Dockerfile'), 'utf8');
const dockerfileMajor = Number(/^ARG NODE_IMAGE=node:(\d+)\./m.exec(dockerfile)?.[1]);
const cliCommands = [...readFileSync(path.join(root, 'services', 'cli', 'src', 'main.ts'), 'utf8').matchAll(/\.command\('([a-z-]+)'/g)].map((m) => m[1]!);

let image: BuiltImage;
const output: string[] = [];

beforeAll(async () => {
  // The global setup provisions podman and the stand-in base; when it could not, this suite fails with why.
  if (process.env.PUSHBASE_IMAGE_TOOLS_ERROR) throw new Error(`the image tools could not be provisioned: ${process.env.PUSHBASE_IMAGE_TOOLS_ERROR}`);
  image = await buildImage({ onOutput: (line) => output.push(line) });
  process.stderr.write(`deploy/Dockerfile built as ${image.tag} in ${image.seconds.toFixed(0)} s (${(image.bytes / 1e6).toFixed(0)} MB)\n`);
}, BUILD_TIMEOUT);

/** podman run --rm without a network: the image's entry point with `args`. */
const run = (args: string[], opts: string[] = []): ReturnType<typeof podman> => podman(['run', '--rm', '--network=none', ...opts, image.tag, ...args], { timeout: 120_000 });

describe('the image built from deploy/Dockerfile', () => {
  it('is built with the configuration the Dockerfile gives it', () => {
    expect(output.join('\n')).toMatch(/npm ci --omit=dev/);
    const config = JSON.parse(podmanOk(['image', 'inspect', '--format', '{{json .Config}}', image.tag])) as {
      User: string;
      Entrypoint: string[];
      Cmd: string[];
      Env: string[];
      ExposedPorts: Record<string, unknown>;
    };
    expect(config.User).toBe('1000:1000');
    expect(config.Entrypoint).toEqual(['node', '--enable-source-maps', '/app/dist/pushbase.js']);
    expect(config.Cmd).toEqual(['serve']);
    expect(config.Env).toEqual(expect.arrayContaining(['NODE_ENV=production', 'PUSHBASE_DATA_DIR=/var/lib/pushbase']));
    expect(Object.keys(config.ExposedPorts).sort()).toEqual(['50051/tcp', '50052/tcp', '8443/tcp', '8444/tcp', '9464/tcp']);
  });

  it('runs the pushbase CLI as its entry point: --help lists every command', () => {
    const res = run(['--help']);
    expect({ status: res.status, stderr: res.stderr }).toEqual({ status: 0, stderr: '' });
    expect(cliCommands.length).toBeGreaterThan(5);
    for (const command of cliCommands) expect(res.stdout).toMatch(new RegExp(`^\\s+${command}\\b`, 'm'));
  });

  it(`runs Node ${dockerfileMajor} as uid 1000, with production dependencies only and nothing of the build left behind`, () => {
    const script = `
      const fs = require('node:fs');
      const writable = (p) => { try { fs.accessSync(p, fs.constants.W_OK); return true; } catch { return false; } };
      process.stdout.write(JSON.stringify({
        node: process.versions.node, uid: process.getuid(), gid: process.getgid(),
        modules: fs.readdirSync('/app/node_modules').flatMap((d) => d.startsWith('@') ? fs.readdirSync('/app/node_modules/' + d).map((s) => d + '/' + s) : [d]),
        app: fs.readdirSync('/app').sort(), appWritable: writable('/app'), dataWritable: writable('/var/lib/pushbase'),
        npmrc: fs.existsSync('/usr/local/etc/npmrc'),
      }));`;
    const res = run(['-e', script], ['--entrypoint', 'node']);
    expect(res.stderr).toBe('');
    const seen = JSON.parse(res.stdout) as { node: string; uid: number; gid: number; modules: string[]; app: string[]; appWritable: boolean; dataWritable: boolean; npmrc: boolean };
    expect(Number(seen.node.split('.')[0])).toBe(dockerfileMajor);
    expect({ uid: seen.uid, gid: seen.gid }).toEqual({ uid: 1000, gid: 1000 });
    expect(seen.app).toEqual(['dist', 'node_modules', 'package.json', 'proto']);
    // Root's and read-only to the service, but for its data directory.
    expect({ app: seen.appWritable, data: seen.dataWritable }).toEqual({ app: false, data: true });
    // The build's own npm settings (deploy/image/build.ts mounts them for RUN only) are not in the image.
    expect(seen.npmrc).toBe(false);
    // Exactly the production dependencies: the packages npm itself counts as such (`npm query .prod`, on
    // the tree installed here from the same lockfile), none for development only, no @pushbase/* link.
    const query = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['query', '.prod'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    expect(query.status).toBe(0);
    const production = (JSON.parse(query.stdout) as { location: string }[])
      .map((n) => /^node_modules\/((?:@[^/]+\/)?[^/]+)$/.exec(n.location)?.[1])
      .filter((name): name is string => name !== undefined && !name.startsWith('@pushbase/'));
    expect(production.length).toBeGreaterThan(20);
    expect(seen.modules.filter((m) => !m.startsWith('.')).sort()).toEqual([...new Set(production)].sort());
  });

  it('serves on a read-only root filesystem: /healthz answers on the admin port, HTTPS on the public one, SIGTERM stops it with 0', async () => {
    const name = `pushbase-image-test-${process.pid}`;
    podman(['rm', '--force', '--volumes', name]);
    podmanOk([
      'run',
      '--detach',
      '--name',
      name,
      '--network=none',
      // Only /tmp and the data directory (the image's VOLUME, here an anonymous volume) are writable.
      '--read-only',
      '--read-only-tmpfs=false',
      '--tmpfs',
      '/tmp',
      image.tag,
    ]);
    const logs = (): string => {
      const res = podman(['logs', name]);
      return res.stdout + res.stderr;
    };
    try {
      // Inside the container's own network namespace: the admin listener binds 127.0.0.1 by default.
      const probe = `
        const https = require('node:https');
        const publicStatus = () => new Promise((resolve) => https.get({ host: '127.0.0.1', port: 8443, path: '/', rejectUnauthorized: false }, (r) => { r.resume(); resolve(r.statusCode); }).on('error', (e) => resolve(e.code)));
        fetch('http://127.0.0.1:8444/healthz').then(async (r) => process.stdout.write(JSON.stringify({ health: r.status, body: await r.json(), public: await publicStatus() })), (e) => process.stdout.write(JSON.stringify({ error: String(e.cause?.code ?? e) })));`;
      let seen: { health?: number; body?: unknown; public?: number | string; error?: string } = {};
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        const res = podman(['exec', name, 'node', '-e', probe]);
        if (res.status !== 0) throw new Error(`podman exec failed: ${res.stderr}\nthe container's log:\n${logs()}`);
        seen = JSON.parse(res.stdout) as typeof seen;
        if (seen.health === 200) break;
        await new Promise((r) => setTimeout(r, 1000));
      }
      expect({ seen, logs: seen.health === 200 ? '' : logs() }).toEqual({ seen: { health: 200, body: { status: 'ok' }, public: expect.any(Number) }, logs: '' });
      // SIGTERM to PID 1, node itself: the server's own handler drains and exits 0 (well before podman's 30 s SIGKILL).
      const stopped = Date.now();
      podmanOk(['stop', '--time', '30', name], { timeout: 60_000 });
      expect(Date.now() - stopped).toBeLessThan(25_000);
      expect(podmanOk(['inspect', '--format', '{{.State.ExitCode}}', name]).trim()).toBe('0');
      expect(logs()).toMatch(/SIGTERM/);
    } finally {
      podman(['rm', '--force', '--volumes', name]);
    }
  }, 120_000);

  it('is saved as a docker-archive naming the image, for `ctr images import` and `podman load`', () => {
    expect(image.archive).not.toBeNull();
    const res = spawnSync('tar', ['-xOf', image.archive!, 'manifest.json'], { encoding: 'utf8' });
    expect(res.status).toBe(0);
    const manifest = JSON.parse(res.stdout) as { Config: string; RepoTags: string[]; Layers: string[] }[];
    expect(manifest).toHaveLength(1);
    expect(manifest[0]!.RepoTags).toEqual([image.tag]);
    expect(manifest[0]!.Config).toContain(image.id.replace(/^sha256:/, ''));
    expect(manifest[0]!.Layers.length).toBeGreaterThanOrEqual(2);
  });
});
