// Completes package-lock.json with the other platforms' binary packages of biome and turbo.
//
// Why: `npm ci` refuses a lock that lacks any optional dependency of a locked package, and
// biome and turbo list one binary package per platform. The registry this project is built
// against serves only the Linux ones, so `npm install` leaves the others out of the lock and
// `npm ci` then fails on every machine. An entry with the platform's os/cpu (and libc) is all
// npm ci needs: it skips a package for another platform without fetching it.
//
// Run after any `npm install` that rewrites the lock: `node scripts/lock-platforms.mjs`.
// It only adds missing entries, and prints what it added; a second run adds nothing.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const file = fileURLToPath(new URL('../package-lock.json', import.meta.url));

/** Platform suffix of a biome (`@biomejs/cli-<suffix>`) or turbo (`@turbo/<suffix>`) binary package. */
const PLATFORMS = {
  'android-arm64': { os: ['android'], cpu: ['arm64'] },
  'android-x64': { os: ['android'], cpu: ['x64'] },
  'darwin-arm64': { os: ['darwin'], cpu: ['arm64'] },
  'darwin-x64': { os: ['darwin'], cpu: ['x64'] },
  'darwin-64': { os: ['darwin'], cpu: ['x64'] },
  'linux-arm64': { os: ['linux'], cpu: ['arm64'], libc: ['glibc'] },
  'linux-x64': { os: ['linux'], cpu: ['x64'], libc: ['glibc'] },
  'linux-64': { os: ['linux'], cpu: ['x64'] },
  'linux-arm64-musl': { os: ['linux'], cpu: ['arm64'], libc: ['musl'] },
  'linux-x64-musl': { os: ['linux'], cpu: ['x64'], libc: ['musl'] },
  'win32-arm64': { os: ['win32'], cpu: ['arm64'] },
  'win32-x64': { os: ['win32'], cpu: ['x64'] },
  'windows-64': { os: ['win32'], cpu: ['x64'] },
  'windows-arm64': { os: ['win32'], cpu: ['arm64'] },
};
const BINARY = /^(?:@biomejs\/cli-|@turbo\/)(.+)$/;

const lock = JSON.parse(readFileSync(file, 'utf8'));
const added = [];
for (const entry of Object.values(lock.packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const path = `node_modules/${name}`;
    const suffix = BINARY.exec(name)?.[1];
    if (lock.packages[path] || suffix === undefined) continue;
    const platform = PLATFORMS[suffix];
    if (!platform) throw new Error(`lock-platforms: no os/cpu known for ${name}; add it to PLATFORMS`);
    const { os, cpu, libc } = platform;
    lock.packages[path] = {
      version,
      cpu,
      dev: entry.dev === true || undefined,
      ...(libc ? { libc } : {}),
      optional: true,
      os,
    };
    added.push(`${name}@${version}`);
  }
}
if (added.length > 0) {
  // npm keeps the root entry first and the rest in name order.
  const [root, ...rest] = Object.entries(lock.packages);
  rest.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  lock.packages = Object.fromEntries([root, ...rest]);
  writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
}
console.log(
  added.length > 0 ? `lock-platforms: added ${added.join(', ')}` : 'lock-platforms: nothing to add',
);
