import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { packageEntries } from '../support/package-entries.js';
import { undocumented } from './tsdoc-coverage.js';

// Every public name and member of every entry point in the packages' `exports` maps carries a
// TSDoc comment (issue #28 item 6): what a user reads in the editor is the reference.
const root = fileURLToPath(new URL('../../', import.meta.url));

describe('the walker', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsdoc-coverage-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, text: string) => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };

  it('lists names and members without a comment, once, at their declaration', () => {
    write(
      'base.ts',
      [
        'interface Hidden {',
        '  /** Documented in the unexported base. */',
        '  inherited: number;',
        '  bare: string;',
        '}',
        '/** Options. */',
        'export interface Options extends Hidden {',
        '  /** How long, in ms. */',
        '  timeoutMs: number;',
        '  retry: {',
        '    attempts: number;',
        '    /** The pause, in ms. */',
        '    pauseMs: number;',
        '  };',
        '  run(input: { id: string }): void;',
        '}',
        'export type Mode =',
        '  | { kind: "a" }',
        '  | {',
        '      /** The b kind. */',
        '      kind: "b";',
        '      extra: boolean;',
        '    };',
        '/** A class. */',
        'export class Thing {',
        '  constructor(private readonly secret: string) {}',
        '  /** The count. */',
        '  count = 0;',
        '  #hidden = 1;',
        '  private alsoHidden = 2;',
        '  open(): number { const local = { notAMember: 1 }; return local.notAMember; }',
        '}',
        '/** Colours. */',
        'export enum Color {',
        '  /** Red. */',
        '  Red,',
        '  Green,',
        '}',
        'export const plain = 1;',
        '/** Codes. */',
        "export const Code = { A: 'A' } as const;",
        'export type Code = (typeof Code)[keyof typeof Code];',
        '/** Documented. */',
        'export function f(opts: {',
        '  /** Fine. */',
        '  fine: boolean;',
        '  loose: number;',
        '}): void {}',
      ].join('\n'),
    );
    const entry = write(
      'index.ts',
      "export * from './base.js';\nexport { Options as Again } from './base.js';\n",
    );
    const other = write('other.ts', "export { Thing } from './base.js';\n");
    expect(
      undocumented(
        [
          { label: 'pkg', file: entry },
          { label: 'pkg/other', file: other },
        ],
        {},
        { noLib: true, types: [] },
      )
        .map((m) => m.name)
        .sort(),
    ).toEqual(
      [
        'pkg: Code (type)',
        'pkg: Color.Green',
        'pkg: Mode',
        'pkg: Mode.extra',
        'pkg: Mode.kind',
        'pkg: Options.bare',
        'pkg: Options.retry',
        'pkg: Options.retry.attempts',
        'pkg: Options.run',
        'pkg: Options.run.id',
        'pkg: Thing.open',
        'pkg: f.loose',
        'pkg: plain',
      ].sort(),
    );
  }, 60_000);
});

it('every public name and member of every package entry point has a TSDoc comment', () => {
  const entries = packageEntries(root);
  expect(entries.map((e) => e.label)).toContain('@once/core/admin');
  const paths = Object.fromEntries(entries.map((e) => [e.label, [e.file]]));
  const missing = undocumented(entries, paths).map((m) => `${m.name} (${relative(root, m.at)})`);
  expect(missing, `${missing.length} without a TSDoc comment:\n${missing.join('\n')}`).toEqual([]);
}, 120_000);
