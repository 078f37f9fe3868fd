import { chmod, mkdir, readFile } from 'node:fs/promises';
import { readIfExists, writeFileAtomic } from './files';
import path from 'node:path';
import { generate } from 'selfsigned';

export interface TlsMaterial {
  readonly cert: string;
  readonly key: string;
  /** Where the certificate lives, printed at start so clients can trust it. */
  readonly certFile: string;
  readonly generated: boolean;
}

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
  const [cert, key] = await Promise.all([readIfExists(certFile), readIfExists(keyFile)]);
  if (cert !== undefined && key !== undefined) return { cert, key, certFile, generated: false };
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
  // The key first: a crash between the two leaves no certificate, so the next start generates both again.
  await writeFileAtomic(keyFile, pems.private, 0o600);
  await writeFileAtomic(certFile, pems.cert, 0o644);
  await chmod(keyFile, 0o600);
  return { cert: pems.cert, key: pems.private, certFile, generated: true };
}
