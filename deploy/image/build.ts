/*
 * Builds deploy/Dockerfile without a Docker engine: podman (whose `podman build` is buildah) on a local
 * stand-in of the Dockerfile's base image, both provisioned once per machine by
 * scripts/ensure-image-tools.js, then saves the image as a docker-archive, which `ctr -n k8s.io images
 * import`, `podman load` and `docker load` all take. test/deploy/image.int.test.ts builds and runs it;
 * deploy/README.md says more.
 *
 *   node --import tsx deploy/image/build.ts [--tag <name>] [--archive <file> | --no-archive] [--context <dir>]
 *                                                     prints the archive's path (default <cache>/image/pushbase.tar)
 *   import { buildImage } from '<root>/deploy/image/build'                      the same from TypeScript
 *
 * Builds are serialized per machine (one flock): two concurrent builds would retag the one name, and the
 * save of one could pick up the other's image.
 */
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const root = path.resolve(__dirname, '..', '..');
/** The name the image gets unless told otherwise: local, so nothing mistakes it for a published image. */
export const DEFAULT_TAG = 'localhost/pushbase:dev';

export interface ImageTools {
  /** CONTAINERS_CONF, CONTAINERS_STORAGE_CONF, TMPDIR: merged into every podman call's environment. */
  readonly env: Record<string, string>;
  /** The stand-in's name, the Dockerfile's base without its digest. */
  readonly baseImage: string;
  readonly dockerfileNodeVersion: string;
  /** The Node release the stand-in holds: the Dockerfile's, or the newest of its major that npm serves. */
  readonly nodeVersion: string;
  readonly npmVersion: string;
  /** <cache>/image: the containers configuration and storage, the stand-in's tarball. */
  readonly home: string;
}

// A CommonJS script run before any dependency is installed (jest's global setup calls it too).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const provision = require('../../scripts/ensure-image-tools.js') as {
  ensureImageTools(say?: (line: string) => void): ImageTools;
  /** `podman <args>` in a mount namespace of its own, for the commands that copy images (see there). */
  copying(args: readonly string[]): [string, string[]];
};

let tools: ImageTools | undefined;
/** podman and the stand-in base, provisioned on first use (minutes, once per machine; then instant). */
export function imageTools(say?: (line: string) => void): ImageTools {
  tools ??= provision.ensureImageTools(say);
  return tools;
}

export interface PodmanOptions {
  readonly timeout?: number;
  /** For the commands that copy images (build, save, import, load, pull, push): see copying(). */
  readonly copies?: boolean;
}

/** Runs podman with the project's containers configuration. */
export function podman(args: readonly string[], opts: PodmanOptions = {}): SpawnSyncReturns<string> {
  const { env } = imageTools();
  const [file, argv] = opts.copies === true ? provision.copying(args) : ['podman', [...args]];
  return spawnSync(file, argv, { env: { ...process.env, ...env }, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: opts.timeout ?? 120_000 });
}

/** podman's stdout, or an error with its stderr. */
export function podmanOk(args: readonly string[], opts: PodmanOptions = {}): string {
  const res = podman(args, opts);
  if (res.error !== undefined) throw new Error(`podman ${args[0]}: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`podman ${args.join(' ')} failed (exit ${res.status}): ${res.stderr}${res.stdout}`);
  return res.stdout;
}

export interface BuildOptions {
  /** The image's name (default DEFAULT_TAG). */
  readonly tag?: string;
  /** Where the docker-archive goes (default <cache>/image/pushbase.tar); null: no archive. */
  readonly archive?: string | null;
  /** The build context (default: the repository this file is in). */
  readonly context?: string;
  /** Each line of podman's output, as it comes. */
  readonly onOutput?: (line: string) => void;
  /** Announces the slow once-per-machine steps. */
  readonly say?: (line: string) => void;
  /** Labels set on the image (`--label k=v`): a rebuilt image that differs, for the cluster's upgrade test. */
  readonly labels?: Readonly<Record<string, string>>;
}

export interface BuiltImage {
  readonly tag: string;
  readonly id: string;
  readonly archive: string | null;
  /** The whole call, provisioning included. */
  readonly seconds: number;
  /** podman's size of the image (every layer, the base's included). */
  readonly bytes: number;
}

/**
 * The registry, CA file and proxies of this machine's npm, for the build's `npm ci`: on a machine whose
 * npm trusts an extra CA (an intercepting proxy) or uses a mirror, the build must too. They reach the
 * build as a global npmrc mounted over /usr/local/etc, which exists in the base already, so that no
 * mount point is left in a layer. A user's `docker build` needs none of this.
 */
function npmSettings(dir: string): string | undefined {
  const keys = ['registry', 'cafile', 'proxy', 'https-proxy', 'noproxy', 'strict-ssl'];
  const res = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['config', 'get', ...keys], { encoding: 'utf8', timeout: 60_000 });
  if (res.status !== 0) return undefined;
  const lines: string[] = [];
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const line of res.stdout.split('\n')) {
    const m = /^([a-z-]+)=(.*)$/.exec(line.trim());
    if (m === null || m[2] === '' || m[2] === 'null' || m[2] === 'undefined') continue;
    if (m[1] === 'cafile') {
      writeFileSync(path.join(dir, 'npm-ca.pem'), readFileSync(m[2]!, 'utf8'));
      lines.push('cafile=/usr/local/etc/npm-ca.pem');
    } else {
      lines.push(`${m[1]}=${m[2]}`);
    }
  }
  writeFileSync(path.join(dir, 'npmrc'), `${lines.join('\n')}\n`);
  return dir;
}

/** Runs a command to its end, each output line to `onLine`; resolves with its exit code and last lines. */
function stream(command: string, args: readonly string[], env: NodeJS.ProcessEnv, onLine: (line: string) => void): Promise<{ code: number | null; tail: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    let partial = '';
    const take = (chunk: Buffer): void => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        tail.push(line);
        if (tail.length > 60) tail.shift();
        onLine(line);
      }
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, tail }));
  });
}

/**
 * Holds the machine's build lock until `release` is called: `flock` (util-linux) keeps it while its `cat`
 * reads our open stdin, so the lock also goes when this process dies, however it dies.
 */
function lock(file: string): Promise<{ release(): void }> {
  return new Promise((resolve, reject) => {
    const child = spawn('flock', [file, 'sh', '-c', 'echo locked; exec cat'], { stdio: ['pipe', 'pipe', 'inherit'] });
    child.on('error', reject);
    child.stdout.once('data', () => resolve({ release: () => child.stdin.end() }));
    child.on('close', (code) => reject(new Error(`flock ${file} exited ${code}`)));
  });
}

/** Builds the image; saves it as a docker-archive unless `archive` is null. */
export async function buildImage(options: BuildOptions = {}): Promise<BuiltImage> {
  const started = Date.now();
  const t = imageTools(options.say);
  const tag = options.tag ?? DEFAULT_TAG;
  const archive = options.archive === undefined ? path.join(t.home, 'pushbase.tar') : options.archive;
  const context = options.context ?? root;
  const env = { ...process.env, ...t.env };
  const held = await lock(path.join(t.home, 'build.lock'));
  try {
    // What a killed build left: its working containers (buildah's, "external" to podman). Under the lock
    // no other build is running, so every one of them is a leftover.
    const leftovers = podmanOk(['ps', '--all', '--external', '--format', '{{.ID}} {{.Status}}'])
      .split('\n')
      .filter((line) => / Storage$/.test(line))
      .map((line) => line.split(' ')[0]!);
    if (leftovers.length > 0) podman(['rm', '--force', ...leftovers]);
    const npmrc = npmSettings(path.join(t.home, 'npm-settings'));
    const args = [
      'build',
      '--pull=never',
      '--build-arg',
      `NODE_IMAGE=${t.baseImage}`,
      // The build's npm ci fetches from the npm registry through the host's network.
      '--network=host',
      ...(npmrc === undefined ? [] : ['--volume', `${npmrc}:/usr/local/etc:ro`]),
      ...Object.entries(options.labels ?? {}).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
      '--file',
      path.join(context, 'deploy', 'Dockerfile'),
      '--tag',
      tag,
      context,
    ];
    // nice: minutes of npm ci and bundling must not starve the servers and tests sharing the machine.
    const [file, argv] = provision.copying(args);
    const res = await stream('nice', ['-n', '10', file, ...argv], env, options.onOutput ?? (() => undefined));
    if (res.code !== 0) throw new Error(`podman build failed (exit ${res.code}); its output ends:\n${res.tail.join('\n')}`);
    // Untagged images a day old (earlier builds' stages) go; younger ones stay as the layer cache.
    podman(['image', 'prune', '--force', '--filter', 'until=24h']);
    if (archive !== null) {
      mkdirSync(path.dirname(archive), { recursive: true });
      const partial = `${archive}.${process.pid}.partial`;
      rmSync(partial, { force: true });
      try {
        podmanOk(['save', '--format', 'docker-archive', '--output', partial, tag], { timeout: 10 * 60_000, copies: true });
        renameSync(partial, archive);
      } finally {
        rmSync(partial, { force: true });
      }
    }
    const [id, size] = podmanOk(['image', 'inspect', '--format', '{{.Id}} {{.Size}}', tag]).trim().split(' ');
    return { tag, id: id!, archive, seconds: (Date.now() - started) / 1000, bytes: Number(size) };
  } finally {
    held.release();
  }
}

/** The command line (see the head of this file); prints the archive's path, or the tag without one. */
async function main(argv: string[]): Promise<void> {
  const value = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i === -1 ? undefined : argv[i + 1];
  };
  const tag = value('--tag');
  const context = value('--context');
  const archive = argv.includes('--no-archive') ? null : value('--archive');
  const built = await buildImage({
    ...(tag === undefined ? {} : { tag }),
    ...(context === undefined ? {} : { context: path.resolve(context) }),
    ...(archive === undefined ? {} : { archive: archive === null ? null : path.resolve(archive) }),
    onOutput: (line) => process.stderr.write(`${line}\n`),
    say: (line) => process.stderr.write(`${line}\n`),
  });
  process.stderr.write(`pushbase: built ${built.tag} (${built.id.slice(0, 12)}, ${(built.bytes / 1e6).toFixed(0)} MB) in ${built.seconds.toFixed(0)} s\n`);
  process.stdout.write(`${built.archive ?? built.tag}\n`);
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((e: unknown) => {
    process.stderr.write(`pushbase: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  });
}
