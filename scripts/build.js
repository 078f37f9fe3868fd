#!/usr/bin/env node
// Bundles the TypeScript services into dist/pushbase.js, which `npm start`, the `pushbase` command and the
// end-to-end tests run, dist/write-worker.js, the threads that parse and validate writes, and dist/snapshot-worker.js,
// the thread that encodes snapshot frames. Third-party packages stay external (loaded from node_modules);
// the @pushbase/* workspaces are compiled in. Compiling ahead of time, rather than through tsx's loader,
// matters on the hot path: the loader keeps function names by wrapping every closure creation in a
// defineProperty call and turns module exports into getters (measured in bench/, see the issue note).
'use strict';
const { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync } = require('node:fs');
const path = require('node:path');
const esbuild = require('esbuild');

const root = path.resolve(__dirname, '..');
const manifests = [path.join(root, 'package.json'), ...readdirSync(path.join(root, 'services')).map((d) => path.join(root, 'services', d, 'package.json'))];
const external = new Set();
for (const file of manifests) {
  let pkg;
  try {
    pkg = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    continue;
  }
  for (const name of Object.keys({ ...pkg.dependencies, ...pkg.devDependencies })) if (!name.startsWith('@pushbase/')) external.add(name);
}

// Start clean, so no bundle of a removed entry point lingers beside the new ones.
rmSync(path.join(root, 'dist'), { recursive: true, force: true });

// The dataset browser page (services/ui, docs/browser.md): its script bundled with chart.js for browsers, beside
// its HTML and CSS in dist/ui, which the admin listener serves (services/gateway/src/ui.ts). Nothing is
// fetched from elsewhere at run time.
const ui = path.join(root, 'dist', 'ui');
mkdirSync(ui, { recursive: true });
for (const file of ['index.html', 'styles.css']) copyFileSync(path.join(root, 'services/ui/static', file), path.join(ui, file));
const page = esbuild.build({
  entryPoints: { app: path.join(root, 'services/ui/src/main.ts') },
  outdir: ui,
  bundle: true,
  platform: 'browser',
  target: ['es2022'],
  format: 'iife',
  minify: true,
  sourcemap: true,
  legalComments: 'linked',
  logLevel: 'warning',
});

const server = esbuild
  .build({
    // The server, and the write-pool and snapshot-pool threads it starts from beside itself
    // (services/app/src/write-pool.ts: the embedded server's and the records service's;
    // services/embedded/src/snapshot-pool.ts).
    entryPoints: {
      pushbase: path.join(root, 'services/cli/src/main.ts'),
      'write-worker': path.join(root, 'services/app/src/write-worker.ts'),
      'snapshot-worker': path.join(root, 'services/embedded/src/snapshot-worker.ts'),
    },
    outdir: path.join(root, 'dist'),
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    sourcemap: true,
    external: [...external],
    logLevel: 'warning',
  });

Promise.all([page, server]).catch(() => process.exit(1));
