import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { chmod, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { generate } from 'selfsigned';
import { readIfExists, SideFileError, writeFileAtomic } from './files';
import { syncDirectory } from './fs';

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
    const certFile = path.resolve(files.certFile);
    const keyFile = path.resolve(files.keyFile);
    const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
    checkPair(certFile, cert, keyFile, key, 'fix PUSHBASE_TLS_CERT / PUSHBASE_TLS_KEY');
    return { cert, key, certFile, generated: false };
  }
  const certFile = path.resolve(dataDir, 'tls', 'cert.pem');
  const keyFile = path.resolve(dataDir, 'tls', 'key.pem');
  const [cert, key] = await Promise.all([readIfExists(certFile), readIfExists(keyFile)]);
  const remedy = `restore ${path.dirname(certFile)} from a backup, or delete both files to have a new self-signed certificate generated (clients that trust the old one will refuse the new one)`;
  if (cert !== undefined && key !== undefined) {
    checkPair(certFile, cert, keyFile, key, remedy);
    return { cert, key, certFile, generated: false };
  }
  // The key is written first, so a key without a certificate is a first start cut short: that key was never
  // served, and both are generated again. A certificate without its key was served, and clients may trust it.
  if (cert !== undefined) throw new SideFileError(keyFile, `is missing while ${certFile} exists`, remedy);
  await mkdir(path.dirname(certFile), { recursive: true, mode: 0o700 });
  await syncDirectory(dataDir); // the new tls/ entry
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

/**
 * Both files must parse, and the certificate must be for that key. Without this check a damaged file only
 * shows when every TLS handshake fails, after the server has logged "listening".
 */
function checkPair(certFile: string, cert: string, keyFile: string, key: string, remedy: string): void {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    throw new SideFileError(keyFile, `does not hold a usable PEM private key (${key.trim() === '' ? 'it is empty' : (err as Error).message})`, remedy);
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch (err) {
    throw new SideFileError(certFile, `does not hold a usable PEM certificate (${cert.trim() === '' ? 'it is empty' : (err as Error).message})`, remedy);
  }
  if (!x509.checkPrivateKey(privateKey)) throw new SideFileError(certFile, `is not the certificate of the key in ${keyFile}`, remedy);
}
