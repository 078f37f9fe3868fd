import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { generate } from 'selfsigned';

export interface TlsMaterial {
  readonly cert: string;
  readonly key: string;
  /** Where the certificate lives, printed at start so clients can trust it. */
  readonly certFile: string;
  readonly generated: boolean;
}

const exists = async (file: string): Promise<boolean> =>
  readFile(file).then(
    () => true,
    () => false,
  );

/**
 * The operator's certificate files when given; otherwise a self-signed certificate for localhost,
 * generated once into the data directory and reused on every later start.
 */
export async function loadOrCreateTls(dataDir: string, files: { certFile: string; keyFile: string } | undefined): Promise<TlsMaterial> {
  if (files !== undefined) {
    const [cert, key] = await Promise.all([readFile(files.certFile, 'utf8'), readFile(files.keyFile, 'utf8')]);
    return { cert, key, certFile: path.resolve(files.certFile), generated: false };
  }
  const certFile = path.resolve(dataDir, 'tls', 'cert.pem');
  const keyFile = path.resolve(dataDir, 'tls', 'key.pem');
  if ((await exists(certFile)) && (await exists(keyFile))) {
    const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
    return { cert, key, certFile, generated: false };
  }
  await mkdir(path.dirname(certFile), { recursive: true, mode: 0o700 });
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    // An EC key is generated in milliseconds; 825 days is the longest validity clients still accept.
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 825 * 86_400_000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }, { type: 7, ip: '::1' }] },
    ],
  });
  // Write beside, then rename: a crash mid-write never leaves half a key that a restart would trust.
  await writeFile(`${keyFile}.tmp`, pems.private, { mode: 0o600 });
  await writeFile(`${certFile}.tmp`, pems.cert, { mode: 0o644 });
  await rename(`${keyFile}.tmp`, keyFile);
  await rename(`${certFile}.tmp`, certFile);
  await chmod(keyFile, 0o600);
  return { cert: pems.cert, key: pems.private, certFile, generated: true };
}
