import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TestServer } from '../helpers/server';

/*
 * A side file cut short by a power loss (an older data directory's api-keys.json, tls/cert.pem right after
 * a first start) stops the server before it listens, with a message naming the file; before, an empty keys file stopped it with
 * "Unexpected end of JSON input" naming nothing, and an empty certificate let it log "listening" while every
 * TLS handshake failed.
 */

jest.setTimeout(60_000);

describe('a data directory with an unusable side file', () => {
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.kill9();
  });

  it.each([
    ['api-keys.json', 'api-keys.json', /api-keys\.json is empty\. Refusing to start/],
    ['tls/cert.pem', path.join('tls', 'cert.pem'), /cert\.pem does not hold a usable PEM certificate \(it is empty\)\. Refusing to start/],
  ])('is refused at start when %s is empty, naming the file', async (_name, rel, message) => {
    const first = new TestServer();
    servers.push(first);
    await first.start();
    expect(await first.stop()).toBe(0);
    mkdirSync(path.dirname(path.join(first.dataDir, rel)), { recursive: true });
    writeFileSync(path.join(first.dataDir, rel), '');
    const second = new TestServer({ dataDir: first.dataDir, keys: first.keys });
    servers.push(second);
    const started = second.start();
    await expect(started).rejects.toThrow(/exited with 1 before listening/);
    await expect(started).rejects.toThrow(message);
    await expect(started).rejects.toThrow(path.join(first.dataDir, rel));
  });
});
