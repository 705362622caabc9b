/**
 * The cross-sample check's parsing: the tables the docs' code blocks create and write, and the
 * consumer names their consumers record effects under. A reader pastes several samples into one
 * database; `CREATE TABLE IF NOT EXISTS` hides a table created with other columns by an earlier
 * sample, and two consumers of one name share one inbox (a Kafka group and a NATS durable both
 * called `billing` turned every NATS message into a `conflict`).
 */

/** One fenced block of a Markdown file, any language. */
export interface Block {
  file: string;
  /** 1-based line of the block's first code line. */
  line: number;
  lang: string;
  code: string;
  /** The `<!-- sample: NAME -->` marker right above the block: a program a reader runs. */
  program?: string;
}

/** Every fenced block of `md`, with the sample marker of the line above its fence, if any. */
export function blocks(file: string, md: string): Block[] {
  const lines = md.split('\n').map((l) => l.replace(/\r$/, ''));
  const out: Block[] = [];
  let open: { fence: string; lang: string; start: number; body: string[]; program?: string } | undefined;
  for (const [i, line] of lines.entries()) {
    if (!open) {
      const m = /^ {0,3}(`{3,}|~{3,})\s*(\S*)/.exec(line);
      if (m) {
        const marker = /^<!-- sample: ([A-Za-z0-9_-]+)\b.*-->\s*$/.exec(lines[i - 1] ?? '');
        open = { fence: m[1]!, lang: m[2]!.toLowerCase(), start: i + 2, body: [] };
        if (marker) open.program = marker[1]!;
      }
      continue;
    }
    if (new RegExp(`^ {0,3}${open.fence[0]}{${open.fence.length},}\\s*$`).test(line)) {
      const b: Block = { file, line: open.start, lang: open.lang, code: open.body.join('\n') };
      if (open.program) b.program = open.program;
      out.push(b);
      open = undefined;
    } else {
      open.body.push(line);
    }
  }
  return out;
}

/** Splits `s` at commas outside parentheses. */
function topLevelItems(s: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      items.push(cur);
      cur = '';
    } else cur += ch;
  }
  items.push(cur);
  return items.map((i) => i.trim()).filter(Boolean);
}

/** The text inside the parenthesis that opens at `open` (exclusive), or undefined. */
function parenthesised(code: string, open: number): string | undefined {
  let depth = 0;
  for (let i = open; i < code.length; i++) {
    if (code[i] === '(') depth++;
    else if (code[i] === ')') {
      depth--;
      if (depth === 0) return code.slice(open + 1, i);
    }
  }
  return undefined;
}

const unquote = (name: string) => name.replace(/"/g, '').toLowerCase();
const CONSTRAINT = /^(primary\s+key|unique|constraint|foreign\s+key|check|exclude)\b/i;

/** A table a block creates, with its column names (lower case, in order). */
export interface TableShape {
  at: string;
  table: string;
  columns: string[];
}

/** `CREATE TABLE [IF NOT EXISTS] name (...)` in a block: the table and its columns. */
export function createdTables(b: Block): TableShape[] {
  const out: TableShape[] = [];
  const re = /create\s+table\s+(?:if\s+not\s+exists\s+)?([A-Za-z_][\w."]*)\s*\(/gi;
  for (const m of b.code.matchAll(re)) {
    const inner = parenthesised(b.code, m.index + m[0].length - 1);
    if (inner === undefined) continue;
    const columns = topLevelItems(inner)
      .filter((item) => !CONSTRAINT.test(item))
      .map((item) => unquote(item.split(/\s+/)[0] ?? ''));
    const line = b.line + b.code.slice(0, m.index).split('\n').length - 1;
    out.push({ at: `${b.file}:${line}`, table: unquote(m[1]!), columns });
  }
  return out;
}

/** `INSERT INTO name (columns)` in a block. */
export function insertedColumns(b: Block): TableShape[] {
  const out: TableShape[] = [];
  for (const m of b.code.matchAll(/insert\s+into\s+([A-Za-z_][\w."]*)\s*\(/gi)) {
    const inner = parenthesised(b.code, m.index + m[0].length - 1);
    if (inner === undefined) continue;
    const line = b.line + b.code.slice(0, m.index).split('\n').length - 1;
    out.push({ at: `${b.file}:${line}`, table: unquote(m[1]!), columns: topLevelItems(inner).map(unquote) });
  }
  return out;
}

/** What records effects under a name: a broker's consumer, core's inbox, or @once/http. */
export type Kind = 'kafka' | 'sqs' | 'rabbitmq' | 'nats' | 'inbox' | 'http';

const FACTORIES: Record<string, { kind: Kind; key: string }> = {
  createKafkaConsumer: { kind: 'kafka', key: 'groupId' },
  createSqsConsumer: { kind: 'sqs', key: 'consumer' },
  createRabbitConsumer: { kind: 'rabbitmq', key: 'consumer' },
  createNatsConsumer: { kind: 'nats', key: 'consumer' },
  createInbox: { kind: 'inbox', key: 'consumer' },
  createIdempotency: { kind: 'http', key: 'consumer' },
};

/** A consumer name a block's factory call records effects under. */
export interface ConsumerName {
  at: string;
  kind: Kind;
  name: string;
}

/** The string-literal consumer names of the factory calls in a block. */
export function consumerNames(b: Block): ConsumerName[] {
  const out: ConsumerName[] = [];
  for (const m of b.code.matchAll(
    /\b(create(?:Kafka|Sqs|Rabbit|Nats)Consumer|createInbox|createIdempotency)\s*\(/g,
  )) {
    const f = FACTORIES[m[1]!]!;
    const args = parenthesised(b.code, m.index + m[0].length - 1) ?? '';
    const name = new RegExp(`\\b${f.key}:\\s*(['"\`])([^'"\`]+)\\1`).exec(args);
    if (!name) continue;
    const line = b.line + b.code.slice(0, m.index).split('\n').length - 1;
    out.push({ at: `${b.file}:${line}`, kind: f.kind, name: name[2]! });
  }
  return out;
}

/**
 * The clashes across `all` blocks:
 * - one table created with two column lists;
 * - an insert naming a column the table, as the docs create it, lacks;
 * - one consumer name used by two kinds of consumer (a Kafka group and a NATS durable);
 * - among the programs (blocks with a sample marker), a table or consumer name of two programs.
 */
export function clashes(all: Block[]): string[] {
  const problems: string[] = [];
  const shapes = new Map<string, TableShape>();
  for (const t of all.flatMap(createdTables)) {
    const first = shapes.get(t.table);
    if (!first) shapes.set(t.table, t);
    else if ([...first.columns].sort().join() !== [...t.columns].sort().join())
      problems.push(
        `${t.at}: table ${t.table} created as (${t.columns.join(', ')}), at ${first.at} as (${first.columns.join(', ')})`,
      );
  }
  for (const ins of all.flatMap(insertedColumns)) {
    const shape = shapes.get(ins.table);
    const missing = shape ? ins.columns.filter((c) => !shape.columns.includes(c)) : [];
    if (shape && missing.length)
      problems.push(
        `${ins.at}: inserts ${missing.join(', ')} into ${ins.table}, created at ${shape.at} as (${shape.columns.join(', ')})`,
      );
  }
  const kinds = new Map<string, ConsumerName>();
  for (const c of all.flatMap(consumerNames)) {
    const first = kinds.get(c.name);
    if (!first) kinds.set(c.name, c);
    else if (first.kind !== c.kind)
      problems.push(
        `${c.at}: consumer name '${c.name}' (${c.kind}) is a ${first.kind} consumer's at ${first.at}`,
      );
  }
  const owner = new Map<string, Block>();
  for (const p of all.filter((b) => b.program)) {
    const used = new Set([
      ...createdTables(p).map((t) => `table ${t.table}`),
      ...insertedColumns(p).map((t) => `table ${t.table}`),
      ...consumerNames(p).map((c) => `consumer name '${c.name}'`),
    ]);
    for (const what of used) {
      const first = owner.get(what);
      if (first)
        problems.push(
          `${p.file}:${p.line}: program ${p.program} uses ${what}, as does program ${first.program} (${first.file}:${first.line})`,
        );
      else owner.set(what, p);
    }
  }
  return problems;
}
