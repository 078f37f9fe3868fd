import * as path from 'node:path';
import { runCommand } from '../command';
import { readClusterConfig } from './config';
import { down, importImage, status, up } from './cluster';

/*
 * `npm run cluster:up|down|status`: a single-node Kubernetes cluster inside a private mount + network
 * namespace (deploy/cluster/cluster.ts; docs/cluster.md). `import <archive>` loads an image archive
 * (docker save / OCI) into the cluster's containerd. TypeScript like deploy/local: the tests' global setup
 * can run the same code, and it is typechecked and linted.
 */

const USAGE = 'usage: cluster up [--no-pushbase]|down|status|import <image archive>\n';

async function main(argv: readonly string[], say: (line: string) => void): Promise<number> {
  const config = readClusterConfig(process.env, path.resolve(__dirname, '..', '..'));
  switch (argv[0]) {
    case 'up': {
      // `up --no-pushbase`: the bare cluster, without Kafka, ClickHouse, Redis and the chart.
      const r = await up(config, say, { pushbase: !argv.includes('--no-pushbase') });
      if (!r.already) say(`up in ${r.seconds.toFixed(1)} s`);
      return 0;
    }
    case 'down': {
      const t0 = Date.now();
      const stopped = await down(config, say);
      say(stopped ? `down in ${((Date.now() - t0) / 1000).toFixed(1)} s` : 'nothing of ours was running');
      return 0;
    }
    case 'status': {
      const s = await status(config);
      process.stdout.write(`${'holder'.padEnd(25)}${s.holder === undefined ? 'not running' : `pid ${String(s.holder).padEnd(9)}running`}\n`);
      for (const p of s.processes) process.stdout.write(`${p.name.padEnd(25)}pid ${String(p.pid).padEnd(9)}${p.running ? 'running' : 'not running'}\n`);
      process.stdout.write(`API server ${s.apiServer}: ${s.apiReady ? 'ready' : 'not answering'}; node: ${s.nodeReady ? 'Ready' : 'not Ready'}\n`);
      process.stdout.write(`kubeconfig: ${s.kubeconfig}\n`);
      process.stdout.write(s.up ? 'up\n' : 'down\n');
      return s.up ? 0 : 3;
    }
    case 'import': {
      if (argv[1] === undefined) break;
      await importImage(config, argv[1]);
      say(`imported ${argv[1]}`);
      return 0;
    }
    case undefined:
    default:
      break;
  }
  process.stderr.write(USAGE);
  return 2;
}

void runCommand('cluster', main);
