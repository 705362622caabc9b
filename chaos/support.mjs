// Loads the parts of test/support the campaign reuses (fault proxy, ledger verdict) without a
// TypeScript runtime: Node 20 cannot strip types, so each file is transpiled once with the
// repo's own TypeScript into .cache/chaos/support/ and imported from there. The sources stay
// the single definition; nothing here changes their behaviour.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, '.cache', 'chaos', 'support');
const FILES = ['fault-proxy', 'ledger', 'isolation', 'env'];

let loaded;

/** `{ FaultProxy, checkEffects, quoteIdent }` from test/support, transpiled on first use. */
export async function testSupport() {
  if (loaded) return loaded;
  mkdirSync(OUT, { recursive: true });
  for (const f of FILES) {
    const src = readFileSync(join(ROOT, 'test', 'support', `${f}.ts`), 'utf8');
    const { outputText } = ts.transpileModule(src, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    writeFileSync(join(OUT, `${f}.js`), outputText);
  }
  const [proxy, ledger, isolation] = await Promise.all(
    ['fault-proxy', 'ledger', 'isolation'].map((f) => import(pathToFileURL(join(OUT, `${f}.js`)).href)),
  );
  loaded = {
    FaultProxy: proxy.FaultProxy,
    checkEffects: ledger.checkEffects,
    quoteIdent: isolation.quoteIdent,
  };
  return loaded;
}
