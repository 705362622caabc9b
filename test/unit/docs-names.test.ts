import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { docFiles } from './doc-samples.js';
import { type Block, blocks, clashes, consumerNames, createdTables, insertedColumns } from './docs-names.js';

// A reader pastes the docs' samples into one database and one broker: tables and consumer names
// must not clash across them, and every program (a block under a `<!-- sample: NAME -->` marker)
// is plain JavaScript that runs as a `.mjs` file, as the root README promises.
const root = fileURLToPath(new URL('../../', import.meta.url));
const all = (): Block[] => docFiles(root).flatMap((f) => blocks(f, readFileSync(join(root, f), 'utf8')));
const block = (code: string, program?: string): Block => ({
  file: 'a.md',
  line: 1,
  lang: 'ts',
  code,
  ...(program ? { program } : {}),
});

describe('the parsing', () => {
  it('reads created tables, inserts and consumer names', () => {
    const b = block(
      [
        "await pool.query('CREATE TABLE IF NOT EXISTS charges (order_id text PRIMARY KEY, cents integer NOT NULL, PRIMARY KEY (order_id))');",
        "createKafkaConsumer({ kafka, groupId: 'billing', handler: async (m, { tx }) => {",
        "  await tx.query('INSERT INTO charges (order_id, amount) VALUES ($1, $2)', []);",
        '} });',
        "createNatsConsumer({ consumer: 'billing' });",
      ].join('\n'),
    );
    expect(createdTables(b)).toEqual([{ at: 'a.md:1', table: 'charges', columns: ['order_id', 'cents'] }]);
    expect(insertedColumns(b)).toEqual([{ at: 'a.md:3', table: 'charges', columns: ['order_id', 'amount'] }]);
    expect(consumerNames(b)).toEqual([
      { at: 'a.md:2', kind: 'kafka', name: 'billing' },
      { at: 'a.md:5', kind: 'nats', name: 'billing' },
    ]);
  });

  it('finds the clashes of issue #29: one table, two shapes; one name, two brokers; two programs, one table', () => {
    const found = clashes([
      block(
        "CREATE TABLE charges (order_id text, cents int); createKafkaConsumer({ groupId: 'billing' })",
        'a',
      ),
      block("CREATE TABLE charges (order_id text, amount int); createNatsConsumer({ consumer: 'billing' })"),
      block("INSERT INTO charges (amount) VALUES (1); createInbox({ consumer: 'x' })", 'b'),
    ]);
    expect(found).toEqual([
      'a.md:1: table charges created as (order_id, amount), at a.md:1 as (order_id, cents)',
      'a.md:1: inserts amount into charges, created at a.md:1 as (order_id, cents)',
      "a.md:1: consumer name 'billing' (nats) is a kafka consumer's at a.md:1",
      'a.md:1: program b uses table charges, as does program a (a.md:1)',
    ]);
  });
});

describe('the docs’ samples together', () => {
  it('create each table with one shape, and give each consumer name to one kind of consumer and each program its own', () => {
    const b = all();
    expect(b.filter((x) => x.program).length).toBeGreaterThanOrEqual(6);
    expect(b.flatMap(createdTables).length).toBeGreaterThan(5);
    expect(clashes(b).join('\n')).toBe('');
  });

  it('programs are plain JavaScript: each passes `node --check` as a .mjs file', () => {
    const dir = join(root, '.cache/docs-programs');
    mkdirSync(dir, { recursive: true });
    const bad: string[] = [];
    for (const p of all().filter((x) => x.program)) {
      const path = join(dir, `${p.program}.mjs`);
      writeFileSync(path, p.code);
      const r = spawnSync(process.execPath, ['--check', path], { encoding: 'utf8' });
      if (r.status !== 0)
        bad.push(`${p.file}:${p.line} (${p.program}): ${r.stderr.split('\n').slice(0, 5).join(' ')}`);
    }
    expect(bad.join('\n')).toBe('');
  });
});
