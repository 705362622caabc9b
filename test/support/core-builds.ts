// Separately built copies of @once/core, for tests that run one release's code against a schema
// another release migrated (test/integration/rolling-upgrade.test.ts). There is no published
// release to install, so a "release" is the package as of a commit, or this tree with migrations
// appended (the next release, as its author would write it), each compiled by the repository's
// own tsc into .cache/core-builds/<name>/ and loaded with import(). A copy is rebuilt only when
// its inputs change.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type * as CoreAdmin from '../../packages/core/src/admin/index.js';
import type * as Core from '../../packages/core/src/index.js';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BUILDS = join(ROOT, '.cache', 'core-builds');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
// What tsc needs to build packages/core on its own (it has no project references).
const INPUTS = [
  'packages/core/src',
  'packages/core/package.json',
  'packages/core/tsconfig.json',
  'tsconfig.base.json',
];

/**
 * One copy's public API, as its dist/index.js exports it, with the schema names that moved to
 * `@once/core/admin` in 0.2 (older copies export them from the index as well).
 */
export type CoreBuild = typeof Core &
  Pick<typeof CoreAdmin, 'LATEST_SCHEMA_VERSION' | 'MIGRATIONS' | 'compatibleFrom' | 'purge' | 'schemaSql'>;

/** A migration to append, in the shape of `MIGRATIONS`' entries. */
export type ExtraMigration = CoreAdmin.Migration;

/**
 * @once/core as of `commit`, from `git archive` (the repository's history must hold it: a clone,
 * not a shallow one).
 */
export async function coreAtCommit(commit: string): Promise<CoreBuild> {
  const dir = join(BUILDS, `commit-${commit}`);
  return build(dir, `commit ${commit}`, async () => {
    const tar = join(BUILDS, `commit-${commit}.tar`);
    await exec('git', ['-C', ROOT, 'archive', '--format=tar', '-o', tar, commit, ...INPUTS]);
    await exec('tar', ['-xf', tar, '-C', dir]);
    await rm(tar);
  });
}

/** One @once/http release's entry points, as its dist/ exports them (the caller knows their types). */
export interface HttpBuild {
  readonly core: CoreBuild;
  readonly http: Record<string, unknown>;
  readonly fetch: Record<string, unknown>;
  readonly node: Record<string, unknown>;
  readonly fastify: Record<string, unknown>;
  readonly express: Record<string, unknown>;
}

/**
 * @once/http as of `commit`, built with the @once/core of that commit (resolved through a
 * `node_modules/@once/core` link inside the copy), for tests that serve a key with one release
 * and its retry with another.
 */
export async function httpAtCommit(commit: string): Promise<HttpBuild> {
  const dir = join(BUILDS, `http-commit-${commit}`);
  const inputs = [
    ...INPUTS,
    'packages/http/src',
    'packages/http/package.json',
    'packages/http/tsconfig.json',
  ];
  const core = await build(
    dir,
    `http at commit ${commit}`,
    async () => {
      const tar = join(BUILDS, `http-commit-${commit}.tar`);
      await exec('git', ['-C', ROOT, 'archive', '--format=tar', '-o', tar, commit, ...inputs]);
      await exec('tar', ['-xf', tar, '-C', dir]);
      await rm(tar);
      await mkdir(join(dir, 'node_modules', '@once'), { recursive: true });
      await symlink('../../packages/core', join(dir, 'node_modules', '@once', 'core'));
    },
    'packages/http',
  );
  await pinCoreImports(join(dir, 'packages/http/dist'), join(dir, 'packages/core/dist'));
  const load = async (entry: string) =>
    (await import(pathToFileURL(join(dir, 'packages/http/dist', `${entry}.js`)).href)) as Record<
      string,
      unknown
    >;
  return {
    core,
    http: await load('index'),
    fetch: await load('fetch'),
    node: await load('node'),
    fastify: await load('fastify'),
    express: await load('express'),
  };
}

/**
 * Points every `@once/core[/sub]` import of the built files under `dist` at the copy's own core
 * (`coreDist`) by file URL. Inside vitest the workspace aliases would otherwise hand an old
 * @once/http this tree's @once/core, whose internals it was not built against. Idempotent.
 */
async function pinCoreImports(dist: string, coreDist: string): Promise<void> {
  const files = (await readdir(dist, { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile() && e.name.endsWith('.js'))
    .map((e) => join(e.parentPath, e.name));
  for (const file of files) {
    const text = await readFile(file, 'utf8');
    const pinned = text.replace(
      /(from\s+|import\(\s*)'@once\/core(?:\/([a-z-]+))?'/g,
      (_m, lead: string, sub?: string) => {
        const target = pathToFileURL(join(coreDist, sub ?? '', 'index.js')).href;
        return `${lead}'${target}'`;
      },
    );
    if (pinned !== text) await writeFile(file, pinned);
  }
}

/**
 * This tree's @once/core with `extra` appended to its migrations: what the next release would be
 * if those were its new migrations. `name` names the copy in .cache/core-builds/.
 */
export async function coreWithMigrations(name: string, extra: readonly ExtraMigration[]): Promise<CoreBuild> {
  const stamp = [JSON.stringify(extra), ...(await sourceDigests())].join('\n');
  const dir = join(BUILDS, name);
  return build(dir, stamp, async () => {
    for (const input of INPUTS) await cp(join(ROOT, input), join(dir, input), { recursive: true });
    const file = join(dir, 'packages/core/src/schema/migrations.ts');
    const text = await readFile(file, 'utf8');
    // The end of the MIGRATIONS array literal; the new entries go just before it.
    const end = '\n]);\n\n/** The schema version this build of @once/core expects. */';
    if (text.split(end).length !== 2) {
      throw new Error(`core-builds: cannot find the end of MIGRATIONS in ${file}; update coreWithMigrations`);
    }
    const entries = extra.map((m) => `  ${JSON.stringify(m)},`).join('\n');
    await writeFile(file, text.replace(end, `\n${entries}${end}`));
  });
}

async function build(
  dir: string,
  stamp: string,
  fill: () => Promise<void>,
  project = 'packages/core',
): Promise<CoreBuild> {
  await compile(dir, stamp, fill, project);
  const dist = join(dir, 'packages/core/dist');
  // A copy from before the admin entry point has the schema names in its index only.
  const admin = (await import(pathToFileURL(join(dist, 'admin/index.js')).href).catch(() => ({}))) as Record<
    string,
    unknown
  >;
  const index = (await import(pathToFileURL(join(dist, 'index.js')).href)) as Record<string, unknown>;
  return { ...admin, ...index } as CoreBuild;
}

/** Fills `dir` and runs `tsc -b project` there, unless `stamp` says it already holds that build. */
async function compile(
  dir: string,
  stamp: string,
  fill: () => Promise<void>,
  project: string,
): Promise<void> {
  const stampFile = join(dir, '.stamp');
  const built = await readFile(stampFile, 'utf8').catch(() => null);
  if (built !== stamp) {
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    await fill();
    // pg's types resolve from the repository's node_modules, above .cache/.
    await exec(process.execPath, [TSC, '-b', project], { cwd: dir });
    await writeFile(stampFile, stamp);
  }
}

/**
 * @once/nats and the @once/core it was built with, as of `commit`: the path of that copy's
 * `packages/nats/dist/index.js`. Its `@once/core` imports resolve to the copy's own core (a
 * node_modules link inside the copy); the NATS clients and pg come from the repository's
 * node_modules. Load it in a child process (test/support/child.ts): inside vitest, the workspace
 * aliases would hand it this tree's @once/core.
 */
export async function natsAtCommit(commit: string): Promise<string> {
  const dir = join(BUILDS, `nats-commit-${commit}`);
  const inputs = [
    ...INPUTS,
    'packages/nats/src',
    'packages/nats/package.json',
    'packages/nats/tsconfig.json',
  ];
  await compile(
    dir,
    `nats at commit ${commit}`,
    async () => {
      const tar = join(BUILDS, `nats-commit-${commit}.tar`);
      await exec('git', ['-C', ROOT, 'archive', '--format=tar', '-o', tar, commit, ...inputs]);
      await exec('tar', ['-xf', tar, '-C', dir]);
      await rm(tar);
      await mkdir(join(dir, 'node_modules', '@once'), { recursive: true });
      await symlink('../../packages/core', join(dir, 'node_modules', '@once', 'core'));
    },
    'packages/nats',
  );
  return join(dir, 'packages/nats/dist/index.js');
}

/** A digest per file of this tree's build inputs, so an edit to core rebuilds the copies. */
async function sourceDigests(): Promise<string[]> {
  const out: string[] = [];
  for (const input of INPUTS) {
    const path = join(ROOT, input);
    const files = input.endsWith('.json')
      ? [path]
      : (await readdir(path, { recursive: true, withFileTypes: true }))
          .filter((e) => e.isFile())
          .map((e) => join(e.parentPath, e.name))
          .sort();
    for (const f of files)
      out.push(
        `${f.slice(ROOT.length)} ${createHash('sha256')
          .update(await readFile(f))
          .digest('hex')}`,
      );
  }
  return out;
}
