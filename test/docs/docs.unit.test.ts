/*
 * The documentation a reader gets with the repository (README.md, CONTRIBUTING.md, docs/*.md, the READMEs
 * of deploy and the chart) stays inside it and in step with the code: every relative link resolves to a
 * file of the repository (and a link to a heading, to a heading that exists), nothing sends the reader to
 * the documents that live beside the project rather than in it, every PUSHBASE_* variable named is one the
 * code reads, every `pushbase <command>` shown is a command of the CLI, and every document a source file
 * names exists.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '..', '..');

/** Commands the docs describe as planned (docs/operations.md → Accounts and API keys). When one lands, document it and drop it here. */
const PLANNED_COMMANDS = new Set<string>([]);

const docs = ['README.md', 'CONTRIBUTING.md', 'deploy/README.md', 'helm/pushbase/README.md', ...readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const read = (file: string): string => readFileSync(path.join(root, file), 'utf8');

/** The text outside fenced code blocks, with inline code spans blanked: links and headings live there. */
function prose(markdown: string): string {
  let fenced = false;
  return markdown
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line.replace(/`[^`]*`/g, (code) => ' '.repeat(code.length));
    })
    .join('\n');
}

/** The lines inside fenced code blocks and the inline code spans: where commands are shown (a command starts one, or follows && ; |). */
function code(markdown: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else if (fenced) out.push(line);
    else for (const m of line.matchAll(/`([^`]+)`/g)) out.push(m[1] as string);
  }
  return out;
}

/** GitHub's anchors for the headings of a markdown file (lower case, punctuation dropped, spaces to hyphens, repeats numbered). */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (m === null) continue;
    const slug = (m[1] as string)
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

interface Link {
  readonly file: string;
  readonly target: string;
}

const links: Link[] = docs.flatMap((file) => [...prose(read(file)).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => ({ file, target: m[1] as string })));
const relative = links.filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l.target));

test('the documents exist and link to one another', () => {
  expect(docs).toEqual(expect.arrayContaining(['docs/README.md', 'docs/api.md', 'docs/operations.md', 'docs/helm.md', 'docs/configuration.md', 'docs/architecture.md']));
  expect(relative.length).toBeGreaterThan(20);
});

test('every relative link resolves to a file or folder of the repository, and an anchor to a heading there', () => {
  const broken: string[] = [];
  for (const { file, target } of relative) {
    const [pathPart = '', anchor] = target.split('#', 2);
    const resolved = pathPart === '' ? path.join(root, file) : path.resolve(root, path.dirname(file), decodeURI(pathPart));
    const inRepo = path.relative(root, resolved);
    if (inRepo.startsWith('..') || path.isAbsolute(inRepo)) {
      broken.push(`${file}: ${target} leaves the repository`);
      continue;
    }
    if (!existsSync(resolved)) {
      broken.push(`${file}: ${target} does not exist`);
      continue;
    }
    if (anchor !== undefined && anchor !== '' && statSync(resolved).isFile() && resolved.endsWith('.md') && !anchors(readFileSync(resolved, 'utf8')).has(anchor)) {
      broken.push(`${file}: ${target} names no heading of ${inRepo}`);
    }
  }
  expect(broken).toEqual([]);
});

test('nothing sends the reader outside the repository: no ../shared path, none of the documents kept beside the project', () => {
  const outside: string[] = [];
  for (const file of docs) {
    for (const [i, line] of read(file).split('\n').entries()) {
      if (/\.\.\/shared|\b(SPEC|DECISIONS|ARCHITECTURE|STYLE)\.md\b/.test(line)) outside.push(`${file}:${i + 1}: ${line.trim()}`);
    }
  }
  expect(outside).toEqual([]);
});

test('every PUSHBASE_* variable the docs name is read by the code', () => {
  const sources: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === 'dist') continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|js)$/.test(entry.name) && !/\.test\.ts$/.test(entry.name)) sources.push(readFileSync(full, 'utf8'));
    }
  };
  for (const dir of ['services', 'deploy', 'scripts']) walk(path.join(root, dir));
  sources.push(read('test/global-setup.js'));
  const sourceText = sources.join('\n');
  const named = new Set(docs.flatMap((file) => [...read(file).matchAll(/PUSHBASE_[A-Z0-9_]+(?![A-Z0-9_*])/g)].map((m) => m[0])));
  expect(named.size).toBeGreaterThan(30);
  expect([...named].filter((v) => !sourceText.includes(v))).toEqual([]);
});

test('every `pushbase <command>` the docs show is a command of the CLI, and the planned ones are not yet', () => {
  const cli = read('services/cli/src/main.ts') + read('services/cli/src/admin-commands.ts');
  const commands = new Set([...cli.matchAll(/\.command\('([a-z-]+)'/g)].map((m) => m[1] as string));
  expect(commands).toContain('replay');
  const shown = new Set(
    docs.flatMap((file) =>
      code(read(file)).flatMap((line) => [...line.matchAll(/(?:^|&&|;|\|)\s*(?:\$\s+)?(?:pushbase|node dist\/pushbase\.js|bin\/pushbase)\s+([a-z][a-z-]*)/g)].map((m) => m[1] as string)),
    ),
  );
  expect(shown.size).toBeGreaterThan(5);
  expect([...shown].filter((c) => !commands.has(c) && !PLANNED_COMMANDS.has(c))).toEqual([]);
  expect([...PLANNED_COMMANDS].filter((c) => commands.has(c))).toEqual([]);
});

/** The repository's files, as git lists them, less what it ignores (node_modules, dist, …). */
function repositoryFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      if (['node_modules', 'dist', '.git', '.data', '.services', '.cluster', 'coverage', 'reports'].includes(entry.name)) continue;
      const rel = dir === '' ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else out.push(rel);
    }
  };
  walk('');
  return out;
}

test('every document a source file names (a *.md file, a docs/ path) is a file of the repository', () => {
  const files = repositoryFiles();
  const known = new Set(files);
  const sources = files.filter((f) => /\.(ts|js|mjs|cjs|proto|yaml|yml|tpl)$/.test(f));
  expect(sources.length).toBeGreaterThan(200);
  const exists = (from: string, name: string): boolean =>
    known.has(name) || known.has(path.posix.normalize(path.posix.join(path.posix.dirname(from), name))) || files.some((f) => f.endsWith(`/${name}`));
  const missing: string[] = [];
  for (const file of sources) {
    for (const [i, line] of read(file).split('\n').entries()) {
      for (const m of line.matchAll(/(?<![\w./-])((?:[\w.-]+\/)*[\w.-]+\.md|docs\/[\w./-]*[\w-])(?![\w/-])/g)) {
        const name = m[1] as string;
        if (!exists(file, name)) missing.push(`${file}:${i + 1}: ${name}`);
      }
    }
  }
  expect(missing).toEqual([]);
});

test('every "<document> → <section>" a source file names is a section of that document', () => {
  const files = repositoryFiles();
  const docsByName = (from: string, name: string): string | undefined =>
    [name, path.posix.normalize(path.posix.join(path.posix.dirname(from), name))].find((f) => files.includes(f)) ?? files.find((f) => f.endsWith(`/${name}`));
  const norm = (s: string): string => s.replace(/`/g, '').replace(/\s+/g, ' ').trim().toLowerCase();
  // A section is a heading (also up to its first colon or parenthesis) or a list item's bold label.
  const headings = (file: string): string[] =>
    [...read(file).matchAll(/^#{1,6}\s+(.*?)\s*#*\s*$|^\s*- \*\*(.+?)\*\*/gm)].flatMap((m) => {
      const h = norm((m[1] ?? m[2]) as string);
      return [h, h.split(/[:(]/)[0]?.trim() ?? h];
    });
  const wrong: string[] = [];
  let seen = 0;
  for (const file of files.filter((f) => /\.(ts|js|mjs|cjs|proto|yaml|yml|tpl)$/.test(f))) {
    // The reference may wrap onto the next comment line: join them, dropping the comment markers.
    const text = read(file).replace(/\n\s*(?:\*|\/\/|#)\s?/g, ' ');
    for (const m of text.matchAll(/([\w./-]+\.md)(?:\s*→\s*|, ")([^.,;:()"\n]+)/g)) {
      const doc = docsByName(file, m[1] as string);
      if (doc === undefined) continue; // a missing document is the test above's
      const name = norm(m[2] as string);
      seen++;
      if (!headings(doc).some((h) => h !== '' && (h.startsWith(name) || name.startsWith(h)))) wrong.push(`${file}: ${m[1]} → ${(m[2] as string).trim()}`);
    }
  }
  expect(seen).toBeGreaterThan(20);
  expect(wrong).toEqual([]);
});
