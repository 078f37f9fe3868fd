import { readlinkSync } from 'node:fs';
import { up } from '../local/local-servers';
import type { ServicesConfig } from '../local/config';

/*
 * Run by pushbase.ts with `nsenter -t <holder> -m -n`: starts the servers of a deps config (deps.ts) with
 * deploy/local's `up`, whose probes must reach DEPS_IP, which exists only inside the cluster's namespace.
 * The servers are detached and outlive this process; their pids are host pids (no pid namespace).
 *
 *   node --import tsx deploy/cluster/deps-inside.ts '<ServicesConfig as JSON>' <host mount ns> <host net ns>
 */

async function main(): Promise<void> {
  const [json, hostMnt, hostNet] = process.argv.slice(2);
  if (json === undefined || hostMnt === undefined || hostNet === undefined) throw new Error('usage: deps-inside <config json> <host mnt ns> <host net ns>');
  // Never on the host: these servers belong inside the cluster's namespace.
  if (readlinkSync('/proc/self/ns/mnt') === hostMnt || readlinkSync('/proc/self/ns/net') === hostNet) throw new Error('not inside the cluster namespace');
  const config = JSON.parse(json) as ServicesConfig;
  const started = await up(config, (line, kind) => {
    if (kind === 'provision' || /starting|answering|already/.test(line)) process.stdout.write(`${line}\n`);
  });
  process.stdout.write(`started: ${started.join(', ') || 'nothing'}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
