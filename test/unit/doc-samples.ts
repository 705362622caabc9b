/**
 * The docs check: every ```ts / ```typescript block of the Markdown docs is written to
 * .cache/doc-samples/ as a module of its own and type-checked, strictly, against the packages'
 * sources. A sample that no longer matches the API fails with its Markdown file and line.
 *
 * Rules for writers of docs:
 * - A block is checked as written. It may use, without declaring them, only the names of
 *   {@link SAMPLE_CONTEXT} (a pool, an envelope, a few stand-ins for outside services).
 * - A block that is deliberately a fragment opts out with `nocheck` after the language
 *   (```ts nocheck). Keep that rare: a fragment cannot go stale silently only if it is checked.
 * - A block whose first line is a file-name comment (`// kysely-tx.ts`) is written under that
 *   name, so later blocks of the same Markdown file can import it (`from './kysely-tx.js'`).
 *   Each Markdown file's blocks live in a directory of their own.
 * - Blocks in other languages (sh, sql, plain ```) are not checked.
 */
import {
  type Dirent,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import ts from 'typescript';

/** One fenced TypeScript block of a Markdown file. */
export interface DocSample {
  /** The Markdown file, relative to the repository root. */
  file: string;
  /** 1-based line of the block's first code line in that file. */
  line: number;
  code: string;
  /** The block opted out with `nocheck`. */
  nocheck: boolean;
}

/** A type error in a sample, placed in its Markdown file. */
export interface SampleError {
  file: string;
  line: number;
  message: string;
}

const LANGUAGES = new Set(['ts', 'typescript']);

/** Finds the TypeScript blocks of one Markdown text. Fences of three or more backticks or tildes. */
export function extractSamples(file: string, markdown: string): DocSample[] {
  const lines = markdown.split('\n');
  const samples: DocSample[] = [];
  let open: { fence: string; info: string[]; start: number; body: string[] } | undefined;
  for (const [i, raw] of lines.entries()) {
    const line = raw.replace(/\r$/, '');
    if (!open) {
      const m = /^ {0,3}(`{3,}|~{3,})\s*(.*)$/.exec(line);
      if (m) open = { fence: m[1]!, info: m[2]!.trim().split(/\s+/), start: i + 2, body: [] };
      continue;
    }
    const close = new RegExp(`^ {0,3}${open.fence[0]}{${open.fence.length},}\\s*$`);
    if (close.test(line)) {
      const [lang = '', ...flags] = open.info;
      if (LANGUAGES.has(lang.toLowerCase())) {
        samples.push({
          file,
          line: open.start,
          code: open.body.join('\n'),
          nocheck: flags.includes('nocheck'),
        });
      }
      open = undefined;
    } else {
      open.body.push(line);
    }
  }
  return samples;
}

/** What {@link docFiles} adds to the docs whose samples are checked. */
export interface DocFilesOptions {
  /** Directories whose Markdown files count at any depth (`docs` for docs/history/ too). */
  tree?: readonly string[];
  /** Every Markdown file at the top of the repository (CHANGELOG.md, ...). */
  top?: boolean;
  /** Further files, counted when they exist (`chaos/README.md`). */
  extra?: readonly string[];
}

/**
 * The Markdown files the docs tests read, sorted, as paths relative to `root`. Without options,
 * those whose samples are checked: README.md, docs/*.md, and the READMEs of packages/ and
 * examples/. The other docs tests widen it with `options`; every one of them walks the tree here.
 */
export function docFiles(root: string, options: DocFilesOptions = {}): string[] {
  const files = ['README.md'];
  const inDir = (dir: string) => {
    try {
      return readdirSync(join(root, dir), { withFileTypes: true });
    } catch {
      return [];
    }
  };
  for (const e of inDir('docs')) if (e.isFile() && e.name.endsWith('.md')) files.push(`docs/${e.name}`);
  for (const parent of ['packages', 'examples']) {
    for (const e of inDir(parent)) {
      if (!e.isDirectory()) continue;
      const readme = `${parent}/${e.name}/README.md`;
      if (inDir(`${parent}/${e.name}`).some((f) => f.name === 'README.md')) files.push(readme);
    }
  }
  if (options.top) for (const e of inDir('.')) if (e.isFile() && e.name.endsWith('.md')) files.push(e.name);
  for (const dir of options.tree ?? []) files.push(...filesUnder(root, dir));
  for (const f of options.extra ?? []) if (existsSync(join(root, f))) files.push(f);
  return [...new Set(files)].sort();
}

/**
 * The files under `dir` (relative to `root`) whose names end with `ext`, at any depth, as
 * `dir/...` paths; `node_modules` and dot-entries (`.turbo`) are skipped, a missing `dir` has none.
 */
export function filesUnder(root: string, dir: string, ext = '.md'): string[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(join(root, dir), { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    if (e.name === 'node_modules' || e.name.startsWith('.')) return [];
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return filesUnder(root, path, ext);
    return e.isFile() && e.name.endsWith(ext) ? [path] : [];
  });
}

/**
 * Names a sample may use without declaring them: what the surrounding prose has already set up.
 * Typed as the real thing (pg's Pool, core's Envelope) or as the few members the docs call.
 */
export const SAMPLE_CONTEXT = `
import type { Envelope } from '@once/core';
import type pg from 'pg';
import type { DataSource } from 'typeorm';
import type { PrismaClient } from '__PRISMA_CLIENT__';
declare global {
  /**
   * A Prisma 7 client (\`prisma-client\` generator, \`@prisma/adapter-pg\`) with a \`Charge\` model:
   * the tests' generated client, packages/core/test/integration/fixtures/prisma.
   */
  const prisma: PrismaClient;
  /** An initialised TypeORM DataSource. */
  const dataSource: DataSource;
  /** A connection pool (\`new pg.Pool(...)\`) on a database where \`migrate(pool)\` has run. */
  const pool: pg.Pool;
  /** A delivery, as an adapter builds it. */
  const envelope: Envelope;
  /** Stand-in for a payment provider's SDK that takes idempotency keys. */
  const stripe: {
    paymentIntents: {
      create(
        params: { amount: number; currency: string; customer: string; confirm: boolean },
        options: { idempotencyKey: string },
      ): Promise<{ id: string; status: string }>;
    };
  };
  /** Stand-in for a mail service. */
  const mailer: {
    send(mail: { to: string; template: string; charge: string; idempotencyKey: string }): Promise<void>;
  };
}
export {};
`;

function compilerOptions(root: string): ts.CompilerOptions {
  const src = (pkg: string, entry = 'index.ts') => [join(root, 'packages', pkg, 'src', entry)];
  // Every package as @once/<folder>, resolved to its sources as vitest does: a stale or missing
  // dist/ cannot hide a break.
  // Subpaths (`@once/core/admin`, …) come from each package's exports map, dist/ read as src/.
  const paths: Record<string, string[]> = {};
  for (const e of readdirSync(join(root, 'packages'), { withFileTypes: true })) {
    if (!e.isDirectory()) continue;
    paths[`@once/${e.name}`] = src(e.name);
    const manifest = JSON.parse(readFileSync(join(root, 'packages', e.name, 'package.json'), 'utf8'));
    for (const [key, target] of Object.entries<{ default?: string }>(manifest.exports ?? {})) {
      const file = target?.default;
      if (key === '.' || !key.startsWith('./') || !file?.startsWith('./dist/')) continue;
      paths[`@once/${e.name}/${key.slice(2)}`] = src(
        e.name,
        file.slice('./dist/'.length).replace(/\.js$/, '.ts'),
      );
    }
  }
  return {
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2023.d.ts'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    verbatimModuleSyntax: true,
    isolatedModules: true,
    noImplicitOverride: true,
    skipLibCheck: true,
    noEmit: true,
    types: ['node'],
    paths,
  };
}

/** Where a sample is written: its Markdown file's directory, under its own name or its line. */
function samplePath(outDir: string, sample: DocSample): string {
  const named = /^\/\/ ([A-Za-z0-9_-]+\.ts)\s*$/.exec(sample.code.split('\n', 1)[0] ?? '');
  return join(outDir, sample.file.replace(/[^A-Za-z0-9]+/g, '_'), named ? named[1]! : `L${sample.line}.ts`);
}

/**
 * Writes the samples into `outDir` and type-checks them together. Each sample is a module of its
 * own (`export {}` is appended, after its last line, so line numbers stay put). Returns the errors
 * found in the samples, mapped back to their Markdown lines.
 */
export function checkSamples(root: string, outDir: string, samples: DocSample[]): SampleError[] {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const byPath = new Map<string, DocSample>();
  for (const s of samples) {
    const path = samplePath(outDir, s);
    const twin = byPath.get(path);
    if (twin)
      throw new Error(
        `${s.file}:${s.line}: a second block named ${basename(path)} (first at line ${twin.line})`,
      );
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, `${s.code}\nexport {};\n`);
    byPath.set(path, s);
  }
  const context = join(outDir, 'sample-context.d.ts');
  const prismaClient = relative(
    outDir,
    join(root, 'packages/core/test/integration/fixtures/prisma/generated/client.js'),
  );
  writeFileSync(context, SAMPLE_CONTEXT.replace('__PRISMA_CLIENT__', prismaClient));
  const program = ts.createProgram([...byPath.keys(), context], compilerOptions(root));
  const errors: SampleError[] = [];
  const diagnostics = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()];
  for (const d of diagnostics) {
    errors.push({
      file: '(compiler options)',
      line: 0,
      message: ts.flattenDiagnosticMessageText(d.messageText, '\n'),
    });
  }
  for (const [path, sample] of byPath) {
    const source = program.getSourceFile(path);
    if (!source) throw new Error(`the compiler did not load ${relative(root, path)}`);
    for (const d of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
      const at = d.start === undefined ? 0 : source.getLineAndCharacterOfPosition(d.start).line;
      errors.push({
        file: sample.file,
        line: sample.line + at,
        message: `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
      });
    }
  }
  return errors;
}

/** Reads every doc file's samples. */
export function collectSamples(root: string): DocSample[] {
  return docFiles(root).flatMap((file) => extractSamples(file, readFileSync(join(root, file), 'utf8')));
}
