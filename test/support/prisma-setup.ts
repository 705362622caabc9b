import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// Vitest globalSetup of every project: the tests' Prisma client is generated, not committed
// (scripts/prisma-generate.mjs; offline, and about 0.1 s when it is already up to date), so
// `npm test` and `npx vitest run <file>` work from a clean clone.

const SCRIPT = fileURLToPath(new URL('../../scripts/prisma-generate.mjs', import.meta.url));

export default function setup(): void {
  execFileSync(process.execPath, [SCRIPT], { stdio: 'inherit' });
}
