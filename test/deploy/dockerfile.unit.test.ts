/*
 * deploy/Dockerfile, checked without a Docker engine (none runs here): linted by dockerfile-utils and
 * parsed by dockerfile-ast, the linter and parser of VS Code's Docker language server. What the image
 * must be (deploy/README.md): multi-stage, a Node LTS base pinned by exact version and digest, production
 * dependencies only, a non-root user, and the pushbase CLI as its entry point. test/deploy/image.int.test.ts
 * builds it for real and runs the image.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DockerfileParser, type From, type Instruction, type JSONInstruction } from 'dockerfile-ast';
import { validate, ValidationSeverity, type ValidatorSettings } from 'dockerfile-utils';

const root = path.resolve(__dirname, '..', '..');
const text = readFileSync(path.join(root, 'deploy', 'Dockerfile'), 'utf8');
const dockerfile = DockerfileParser.parse(text);

// Every check the linter has, as an error (several are warnings or off by default).
const STRICT: ValidatorSettings = {
  deprecatedMaintainer: ValidationSeverity.ERROR,
  directiveCasing: ValidationSeverity.ERROR,
  emptyContinuationLine: ValidationSeverity.ERROR,
  instructionCasing: ValidationSeverity.ERROR,
  instructionCmdMultiple: ValidationSeverity.ERROR,
  instructionEntrypointMultiple: ValidationSeverity.ERROR,
  instructionHealthcheckMultiple: ValidationSeverity.ERROR,
  instructionJSONInSingleQuotes: ValidationSeverity.ERROR,
  instructionWorkdirRelative: ValidationSeverity.ERROR,
};

interface Stage {
  readonly from: From;
  readonly name: string | null;
  readonly instructions: Instruction[];
}

/** The build stages in order, each with the instructions that follow its FROM. */
function stages(): Stage[] {
  const out: Stage[] = [];
  for (const instruction of dockerfile.getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const from = instruction as From;
      out.push({ from, name: from.getBuildStage(), instructions: [] });
    } else {
      out.at(-1)?.instructions.push(instruction);
    }
  }
  return out;
}

const argsOf = (i: Instruction): string => i.getArgumentsContent() ?? '';
const flag = (i: Instruction, name: string): string | undefined =>
  (i as unknown as { getFlags?: () => { getName(): string; getValue(): string | null }[] }).getFlags?.().find((f) => f.getName() === name)?.getValue() ?? undefined;
const jsonArgs = (i: Instruction): string[] => (i as JSONInstruction).getJSONStrings().map((s) => s.getJSONValue());

/** The earlier stage a stage builds on (FROM <stage>), if any: a FROM names a stage only once it is defined. */
const parentOf = (all: Stage[], stage: Stage): Stage | undefined =>
  all.slice(0, all.indexOf(stage)).find((s) => s.name !== null && s.name === stage.from.getImageName());

/** The stages a stage builds on, transitively. */
function ancestry(all: Stage[], stage: Stage): Stage[] {
  const parent = parentOf(all, stage);
  return parent === undefined ? [stage] : [stage, ...ancestry(all, parent)];
}

/** The CLI's command names, as services/cli/src/main.ts declares them. */
function cliCommands(): Set<string> {
  const main = readFileSync(path.join(root, 'services', 'cli', 'src', 'main.ts'), 'utf8');
  return new Set([...main.matchAll(/\.command\('([a-z-]+)'/g)].map((m) => m[1]!));
}

describe('deploy/Dockerfile', () => {
  const all = stages();
  const final = all.at(-1)!;
  const finalChain = ancestry(all, final);

  it('passes the linter with every check as an error, which does catch a broken Dockerfile', () => {
    expect(validate(text, STRICT).map((d) => `${d.range.start.line + 1}: ${String(d.message as string)}`)).toEqual([]);
    // The same linter on copies with a mistake each (an unknown flag, an instruction without arguments,
    // a relative WORKDIR): the assertion above can fail.
    for (const broken of [text.replace('COPY --from=build', 'COPY --frm=build'), text.replace(/^USER .*$/m, 'USER'), text.replace('WORKDIR /app', 'WORKDIR app')]) {
      expect(validate(broken, STRICT).length).toBeGreaterThanOrEqual(1);
    }
  });

  it('is multi-stage: the bundle is built in one stage, the runtime is another', () => {
    expect(all.length).toBeGreaterThanOrEqual(3);
    const build = all.find((s) => s.instructions.some((i) => i.getKeyword() === 'RUN' && argsOf(i).includes('scripts/build.js')));
    expect(build).toBeDefined();
    expect(finalChain).not.toContain(build);
  });

  it('starts from an even-numbered (LTS) Node.js, pinned by exact version and sha256 digest', () => {
    const external = all.filter((s) => parentOf(all, s) === undefined);
    expect(external.length).toBeGreaterThanOrEqual(1);
    for (const { from } of external) {
      // The base is a build ARG (the tests build on a local stand-in, deploy/image/build.ts): what a
      // plain `docker build` pulls is its default, the FROM with the ARG expanded.
      const image = DockerfileParser.parse(`FROM ${from.getExpandedArguments()[0]!.getValue()}`).getFROMs()[0]!;
      expect(image.getImageName()).toBe('node');
      const tag = image.getImageTag() ?? '';
      const version = /^(\d+)\.(\d+)\.(\d+)(-[a-z0-9-]+)?$/.exec(tag);
      expect(version).not.toBeNull();
      const major = Number(version![1]);
      // Even majors become LTS; that it is the tests' major is test/runtime/node-version.unit.test.ts's check.
      expect(major % 2).toBe(0);
      expect(image.getImageDigest()).toMatch(/^sha256:[0-9a-f]{64}$/);
    }
  });

  it('names its base in one ARG before the first FROM, the form deploy/image/build.ts overrides', () => {
    const args = dockerfile.getInitialARGs().map((a) => a.getProperty());
    expect(args.map((p) => p?.getName())).toEqual(['NODE_IMAGE']);
    // scripts/ensure-image-tools.js reads the stand-in's name and Node version from exactly this line.
    expect(text).toMatch(/^ARG NODE_IMAGE=node:\d+\.\d+\.\d+-[a-z]+-slim@sha256:[0-9a-f]{64}$/m);
    const external = all.filter((s) => parentOf(all, s) === undefined);
    expect(external.map((s) => s.from.getArguments()[0]?.getValue())).toEqual(['${NODE_IMAGE}']);
  });

  it('ships production dependencies only: the runtime copies node_modules from an npm ci --omit=dev stage and installs nothing itself', () => {
    const copies = finalChain.flatMap((s) => s.instructions).filter((i) => i.getKeyword() === 'COPY');
    const modules = copies.filter((i) => /node_modules/.test(argsOf(i)));
    expect(modules).toHaveLength(1);
    const source = all.find((s) => s.name === flag(modules[0]!, 'from'));
    expect(source).toBeDefined();
    const installs = source!.instructions.filter((i) => i.getKeyword() === 'RUN' && /\bnpm (ci|install)\b/.test(argsOf(i)));
    expect(installs).toHaveLength(1);
    expect(argsOf(installs[0]!)).toMatch(/npm ci\b.*--omit=dev/);
    // Nothing in the runtime's own stages installs packages (which could pull in devDependencies).
    for (const stage of finalChain) {
      for (const i of stage.instructions) if (i.getKeyword() === 'RUN') expect(argsOf(i)).not.toMatch(/\bnpm (ci|install|i)\b/);
    }
    // The build stage's node_modules (with the devDependencies) never reaches the runtime.
    const fromBuild = copies.filter((i) => flag(i, 'from') !== undefined && flag(i, 'from') !== source!.name);
    for (const i of fromBuild) expect(argsOf(i)).not.toMatch(/node_modules/);
  });

  it('the bundle needs no devDependency at run time: every package it requires is a production dependency', () => {
    const workspaces = readdirSync(path.join(root, 'services')).filter((d) => existsSync(path.join(root, 'services', d, 'package.json')));
    const manifests = [path.join(root, 'package.json'), ...workspaces.map((d) => path.join(root, 'services', d, 'package.json'))];
    const production = new Set<string>();
    for (const file of manifests) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { dependencies?: Record<string, string> };
      for (const name of Object.keys(pkg.dependencies ?? {})) production.add(name);
    }
    // dist/ is built by jest's global setup (scripts/build.js), as the image's build stage builds it.
    const required = new Set<string>();
    for (const bundle of ['pushbase.js', 'write-worker.js']) {
      const code = readFileSync(path.join(root, 'dist', bundle), 'utf8');
      for (const m of code.matchAll(/require\("([^"]+)"\)/g)) {
        const spec = m[1]!;
        if (spec.startsWith('node:') || spec.startsWith('.') || spec.startsWith('/')) continue;
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
        required.add(name);
      }
    }
    expect(required.size).toBeGreaterThan(5);
    expect([...required].filter((name) => !production.has(name))).toEqual([]);
  });

  it('runs as a non-root user, by number (so Kubernetes can verify runAsNonRoot)', () => {
    const users = final.instructions.filter((i) => i.getKeyword() === 'USER');
    expect(users.length).toBeGreaterThanOrEqual(1);
    const user = argsOf(users.at(-1)!);
    expect(user).toMatch(/^\d+(:\d+)?$/);
    expect(Number(user.split(':')[0])).not.toBe(0);
    // No instruction after it switches back.
    const last = final.instructions.lastIndexOf(users.at(-1)!);
    expect(final.instructions.slice(last + 1).filter((i) => i.getKeyword() === 'USER')).toEqual([]);
  });

  it("has the pushbase CLI as its entry point: node running the bundle of services/cli/src/main.ts, a CLI command as the default", () => {
    const entrypoints = final.instructions.filter((i) => i.getKeyword() === 'ENTRYPOINT');
    expect(entrypoints).toHaveLength(1);
    const entry = jsonArgs(entrypoints[0]!);
    expect(entry[0]).toBe('node');
    expect(entry.at(-1)).toBe('/app/dist/pushbase.js');
    // scripts/build.js bundles the CLI as dist/pushbase.js; the runtime takes dist/ from the stage that runs it.
    expect(readFileSync(path.join(root, 'scripts', 'build.js'), 'utf8')).toMatch(/pushbase: path\.join\(root, 'services\/cli\/src\/main\.ts'\)/);
    const workdir = final.instructions.concat(finalChain.slice(1).flatMap((s) => s.instructions)).find((i) => i.getKeyword() === 'WORKDIR');
    expect(workdir === undefined ? undefined : argsOf(workdir)).toBe('/app');
    const dist = final.instructions.find((i) => i.getKeyword() === 'COPY' && /dist/.test(argsOf(i)));
    const builder = all.find((s) => s.name === (dist === undefined ? undefined : flag(dist, 'from')));
    expect(builder?.instructions.some((i) => i.getKeyword() === 'RUN' && argsOf(i) === 'node scripts/build.js')).toBe(true);
    // The gRPC services load their contracts from proto/ beside dist/ (services/contracts/src/proto.ts).
    expect(final.instructions.some((i) => i.getKeyword() === 'COPY' && /^proto\/? /.test(argsOf(i)))).toBe(true);
    const cmds = final.instructions.filter((i) => i.getKeyword() === 'CMD');
    expect(cmds).toHaveLength(1);
    expect(cliCommands()).toContain(jsonArgs(cmds[0]!)[0]);
  });
});
