#!/usr/bin/env node
/**
 * Generates the Prisma client of the tests (packages/core/test/integration/fixtures/prisma/generated,
 * git-ignored) from its schema.prisma, unless the copy there is already up to date:
 *
 *   node scripts/prisma-generate.mjs           generate when stale (about 0.1 s when up to date)
 *   node scripts/prisma-generate.mjs --force   generate anyway
 *
 * Run by `.ci/run` before the type-check steps, by `npm run typecheck`, and by vitest's global
 * setups (test/support/prisma-setup.ts), so `npm test` and `npx vitest run` find the client too.
 * "Up to date" is a stamp written after a generation: a hash of the schema and of the installed
 * prisma and @prisma/client versions; a missing file of the client also counts as stale.
 *
 * Offline by construction: `prisma generate` for the `prisma-client` generator never runs the
 * schema engine, but the CLI looks for it at start and downloads it when missing
 * (docs/transactions.md). PRISMA_SCHEMA_ENGINE_BINARY pointing at an existing file stops that,
 * and CHECKPOINT_DISABLE stops the CLI's version check and telemetry call home.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = join(root, 'packages/core/test/integration/fixtures/prisma');
const schema = join(dir, 'schema.prisma');
const out = join(dir, 'generated');
const stampFile = join(out, '.stamp');
/** Files the tests import; if one is gone the copy is stale whatever the stamp says. */
const needed = ['client.ts', 'models.ts', 'internal/class.ts'];

const version = (pkg) =>
  JSON.parse(readFileSync(join(root, 'node_modules', pkg, 'package.json'), 'utf8')).version;

const stamp = createHash('sha256')
  .update(readFileSync(schema))
  .update(`\0prisma ${version('prisma')}\0@prisma/client ${version('@prisma/client')}`)
  .digest('hex');

const fresh =
  !process.argv.includes('--force') &&
  existsSync(stampFile) &&
  readFileSync(stampFile, 'utf8').trim() === stamp &&
  needed.every((f) => existsSync(join(out, f)));

if (!fresh) {
  // Any existing file will do (generate never runs it): the schema itself, which is not even
  // executable, so a CLI that did try to run it would fail loudly. A caller's own setting wins.
  const engine = process.env.PRISMA_SCHEMA_ENGINE_BINARY || schema;
  const cli = join(root, 'node_modules/prisma/build/index.js');
  const res = spawnSync(process.execPath, [cli, 'generate', '--schema', schema], {
    cwd: root,
    encoding: 'utf8',
    env: {
      ...process.env,
      PRISMA_SCHEMA_ENGINE_BINARY: engine,
      CHECKPOINT_DISABLE: '1',
      PRISMA_HIDE_UPDATE_MESSAGE: '1',
    },
  });
  if (res.status !== 0) {
    process.stderr.write(res.stdout + res.stderr);
    console.error(`prisma generate failed (exit ${res.status ?? res.signal ?? res.error?.message})`);
    process.exit(1);
  }
  const missing = needed.filter((f) => !existsSync(join(out, f)));
  if (missing.length) {
    console.error(`prisma generate wrote no ${missing.join(', ')} under ${out}`);
    process.exit(1);
  }
  writeFileSync(stampFile, `${stamp}\n`);
  console.log(`prisma client generated in ${out.slice(root.length + 1)}`);
}
