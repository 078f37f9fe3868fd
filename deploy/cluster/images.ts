import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { check, need } from './proc';

/*
 * Single-layer images made from a few files, as `docker save` archives that `ctr images import` reads:
 * the pause sandbox, CoreDNS, and the tests' busybox. No registry, no image builder: the cluster has no way
 * out to pull from, and these images are one static binary each. Written here because the format is three
 * small files (a layer tarball, its config, a manifest); buildah would need a storage folder on the host.
 */

export interface ImageSpec {
  /** The name containerd records, `name:tag`. */
  readonly ref: string;
  /** Files of the image: absolute path inside the image → file on the host. */
  readonly files: Readonly<Record<string, string>>;
  /** Symbolic links inside the image: path → target. */
  readonly links?: Readonly<Record<string, string>>;
  readonly entrypoint?: readonly string[];
  readonly cmd?: readonly string[];
  /** The user the image runs as (numeric, so the restricted Pod Security profile can verify it). */
  readonly user?: string;
}

async function sha256(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** Writes `out`, a `docker save` archive of one image. */
export async function buildImageArchive(spec: ImageSpec, out: string): Promise<void> {
  const tar = need('tar');
  const work = await mkdtemp(`${out}.tmp-`);
  try {
    const root = path.join(work, 'rootfs');
    for (const [inImage, host] of Object.entries(spec.files)) {
      const to = path.join(root, inImage);
      await mkdir(path.dirname(to), { recursive: true });
      await copyFile(host, to);
      await chmod(to, 0o755);
    }
    for (const [inImage, target] of Object.entries(spec.links ?? {})) {
      const at = path.join(root, inImage);
      await mkdir(path.dirname(at), { recursive: true });
      await symlink(target, at);
    }
    for (const d of ['tmp', 'etc']) await mkdir(path.join(root, d), { recursive: true });
    await chmod(path.join(root, 'tmp'), 0o1777);
    const image = path.join(work, 'image');
    await mkdir(image);
    // Reproducible: the same files give the same layer digest, run after run.
    const layer = path.join(image, 'layer.tar');
    await check(tar, ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '-C', root, '-cf', layer, '.']);
    const diffId = await sha256(layer);
    const config = {
      architecture: 'amd64',
      os: 'linux',
      created: '1970-01-01T00:00:00Z',
      config: {
        Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
        ...(spec.entrypoint === undefined ? {} : { Entrypoint: spec.entrypoint }),
        ...(spec.cmd === undefined ? {} : { Cmd: spec.cmd }),
        ...(spec.user === undefined ? {} : { User: spec.user }),
      },
      rootfs: { type: 'layers', diff_ids: [`sha256:${diffId}`] },
    };
    const configJson = JSON.stringify(config);
    const configName = `${createHash('sha256').update(configJson).digest('hex')}.json`;
    await writeFile(path.join(image, configName), configJson);
    await writeFile(path.join(image, 'manifest.json'), JSON.stringify([{ Config: configName, RepoTags: [spec.ref], Layers: ['layer.tar'] }]));
    await check(tar, ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '-C', image, '-cf', out, '.']);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The tests' tiny image: Debian's static busybox, nothing else, running as an unprivileged user. */
export function busyboxImage(ref: string): ImageSpec {
  return { ref, files: { '/bin/busybox': '/bin/busybox' }, links: { '/bin/sh': 'busybox' }, entrypoint: ['/bin/busybox'], user: '65534' };
}
