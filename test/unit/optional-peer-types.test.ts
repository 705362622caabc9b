import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { type Entry, packageEntries } from '../support/package-entries.js';

// An optional peer is one a user may not have installed: kafkajs beside @platformatic/kafka, say.
// The declarations a user's compiler reads for an entry point must then not import it, or a
// program that never touches that client fails to type-check (without skipLibCheck) on "cannot
// find module 'kafkajs'". Only the entry made for that peer may name it: `@once/kafka/kafkajs`
// kafkajs, `@once/core/drizzle` drizzle-orm, `@once/http/fastify` fastify. The declarations are
// emitted here from the sources, in memory, and their import graph walked from each entry.
const root = fileURLToPath(new URL('../../', import.meta.url));
const entries = packageEntries(root);
const paths = Object.fromEntries(entries.map((e) => [e.label, [e.file]]));

interface Pkg {
  dir: string;
  name: string;
  optional: string[];
}
const packageOf = (file: string): Pkg => {
  const dir = resolve(dirname(file), '..').replace(/\/src(\/.*)?$/, '');
  const pkgDir = dir.endsWith('/src') ? dirname(dir) : dir;
  const json = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as {
    name: string;
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  };
  const optional = Object.entries(json.peerDependenciesMeta ?? {})
    .filter(([, m]) => m.optional)
    .map(([n]) => n);
  return { dir: pkgDir, name: json.name, optional };
};

/** The emitted `.d.ts` text of every source file under `srcDir`, by the source's path. */
function declarations(srcDir: string, files: string[]): Map<string, string> {
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    declaration: true,
    emitDeclarationOnly: true,
    skipLibCheck: true,
    strict: true,
    types: ['node'],
    paths,
  });
  const out = new Map<string, string>();
  for (const sf of program.getSourceFiles()) {
    if (!sf.fileName.startsWith(srcDir) || sf.isDeclarationFile) continue;
    program.emit(sf, (_name, text) => out.set(sf.fileName, text), undefined, true);
  }
  return out;
}

/** Bare module names the declarations reachable from `entry` import, with a file that imports each. */
function bareImports(entry: string, dts: Map<string, string>): Map<string, string> {
  const bare = new Map<string, string>();
  const seen = new Set<string>();
  const walk = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = dts.get(file);
    if (text === undefined) throw new Error(`no declarations emitted for ${file}`);
    const info = ts.preProcessFile(text, true, true);
    for (const ref of [...info.importedFiles, ...info.typeReferenceDirectives]) {
      const spec = ref.fileName;
      if (spec.startsWith('.')) {
        const base = resolve(dirname(file), spec).replace(/\.js$/, '');
        walk(dts.has(`${base}.ts`) ? `${base}.ts` : join(base, 'index.ts'));
      } else if (!bare.has(spec)) bare.set(spec, file);
    }
  };
  walk(entry);
  return bare;
}

/** The optional peer a module specifier names (`@mikro-orm/core/x` → `@mikro-orm/core`), if any. */
const peerOf = (spec: string, optional: string[]) =>
  optional.find((p) => spec === p || spec.startsWith(`${p}/`));

const byPackage = new Map<string, Entry[]>();
for (const e of entries) {
  const name = e.label.split('/').slice(0, 2).join('/');
  byPackage.set(name, [...(byPackage.get(name) ?? []), e]);
}

describe('declarations never import an optional peer outside its own entry', () => {
  for (const [name, list] of byPackage) {
    const pkg = packageOf(list[0]!.file);
    if (pkg.optional.length === 0) continue;
    it(`${name}: ${list.map((e) => e.label).join(', ')}`, () => {
      const srcDir = join(pkg.dir, 'src');
      const dts = declarations(
        srcDir,
        list.map((e) => e.file),
      );
      const wrong: string[] = [];
      for (const e of list) {
        const subpath = e.label.slice(name.length + 1);
        for (const [spec, from] of bareImports(e.file, dts)) {
          const peer = peerOf(spec, pkg.optional);
          if (peer && !(subpath !== '' && peer.includes(subpath)))
            wrong.push(`${e.label} → ${spec} (in the declarations of ${from.slice(root.length)})`);
        }
      }
      expect(wrong).toEqual([]);
    }, 120_000);
  }

  it('sees an optional peer where an entry does import it (the walk is not blind)', () => {
    const kafkajsEntry = entries.find((e) => e.label === '@once/kafka/kafkajs');
    expect(kafkajsEntry).toBeDefined();
    const srcDir = join(packageOf(kafkajsEntry!.file).dir, 'src');
    const found = bareImports(kafkajsEntry!.file, declarations(srcDir, [kafkajsEntry!.file]));
    expect([...found.keys()]).toContain('kafkajs');
  }, 120_000);
});
