/*
 * Summarises a V8 .cpuprofile (from `npm run bench -- --phases throughput --cpu-prof DIR`):
 * the functions with the most self time, and the inclusive time of the given function names.
 *
 *   node --import tsx bench/cpuprofile.ts DIR/CPU.….cpuprofile [top=25] [functionName …]
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const [file, topArg, ...names] = process.argv.slice(2);
if (file === undefined) {
  process.stderr.write('usage: node --import tsx bench/cpuprofile.ts PROFILE [top] [functionName …]\n');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const totalUs = profile.endTime - profile.startTime;

const label = (f: CallFrame): string => {
  const where = f.url === '' ? '' : ` ${path.relative(process.cwd(), f.url.replace(/^file:\/\//, ''))}:${f.lineNumber + 1}`;
  return `${f.functionName || '(anonymous)'}${where}`;
};

const self = new Map<string, number>();
for (const [id, us] of selfUs) {
  const key = label(byId.get(id)!.callFrame);
  self.set(key, (self.get(key) ?? 0) + us);
}
const pct = (us: number): string => `${((100 * us) / totalUs).toFixed(1).padStart(5)}%`;
process.stdout.write(`${path.basename(file)}: ${(totalUs / 1e6).toFixed(2)} s profiled\n\nself time:\n`);
for (const [k, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`  ${pct(us)}  ${k}\n`);

if (names.length > 0) {
  process.stdout.write('\ninclusive time (a sample counts once even under recursion):\n');
  for (const name of names) {
    let us = 0;
    for (const [id, t] of selfUs) {
      for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
        if (byId.get(cur)!.callFrame.functionName === name) {
          us += t;
          break;
        }
      }
    }
    process.stdout.write(`  ${pct(us)}  ${name}\n`);
  }
}
