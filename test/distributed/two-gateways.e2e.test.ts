import type { ServiceProcess } from '../../services/cli/src/distributed';
import { requestTo, startSecondGateway, TestServer, type Response } from '../helpers/server';

/*
 * Two gateways on one Redis: the 60-a-minute limit of docs/api.md → Limits is one rolling window per API
 * key whichever gateway a request reaches, because both count in the same Redis sorted set on Redis's
 * clock. The second gateway is a process of its own on the first one's stack (same services, Redis prefix
 * and certificate).
 */

let stack: TestServer;
let second: ServiceProcess;
let other: { port: number; ca: string; plainHttp: boolean };

beforeAll(async () => {
  stack = await new TestServer({ mode: 'distributed' }).start();
  second = await startSecondGateway(stack);
  other = { port: Number(second.ready.port), ca: stack.ca, plainHttp: false };
}, 240_000);

afterAll(async () => {
  await second?.signal('SIGTERM', 30_000);
  await stack?.stop();
}, 120_000);

it('refuses the 61st request in a rolling minute whichever gateway gets it', async () => {
  const key = stack.keys.acme!;
  expect(other.port).not.toBe(stack.port);
  const gateways = [stack, other] as const;
  const answers: Response[] = [];
  // Alternating: 30 requests through each gateway, every one counted against the same window.
  for (let i = 0; i < 60; i++) answers.push(await requestTo(gateways[i % 2]!, 'GET', '/', { key }));
  expect(answers.map((r) => r.status)).toEqual(Array(60).fill(200));
  expect(answers.map((r) => Number(r.headers['ratelimit-remaining']))).toEqual(Array.from({ length: 60 }, (_, i) => 59 - i));

  for (const gateway of gateways) {
    const refused = await requestTo(gateway, 'GET', '/', { key });
    expect(refused.status).toBe(429);
    expect(refused.body.error.message).toBe('You have exceeded the API rate limit of 60 requests per minute. Try sending data less frequently.');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  }
  // Another key has a window of its own on both.
  for (const gateway of gateways) expect((await requestTo(gateway, 'GET', '/', { key: stack.keys.globex! })).status).toBe(200);
}, 120_000);
