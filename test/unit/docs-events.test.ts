import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { CONSUMER_EVENT_NAMES } from '../../packages/core/src/adapter/consumer.js';
import { ONCE_EVENT_NAMES } from '../../packages/core/src/message/events.js';
import { KAFKA_CONSUMER_EVENT_NAMES } from '../../packages/kafka/src/events.js';
import { NATS_CONSUMER_EVENT_NAMES } from '../../packages/nats/src/events.js';
import { RABBIT_CONSUMER_EVENT_NAMES } from '../../packages/rabbitmq/src/events.js';
import { SQS_CONSUMER_EVENT_NAMES } from '../../packages/sqs/src/events.js';
import { docFiles } from './doc-samples.js';

// Every event name the docs mention is one the code emits: an alert written from the docs on a
// name that no longer exists (SQS's `dead-letter`, gone since the kit's `message:dead-lettered`)
// would never fire. A page about one broker is held to that broker's events and core's.
const root = fileURLToPath(new URL('../../', import.meta.url));

const core = [...Object.keys(ONCE_EVENT_NAMES), ...Object.keys(CONSUMER_EVENT_NAMES)];
const byBroker: Record<string, string[]> = {
  kafka: Object.keys(KAFKA_CONSUMER_EVENT_NAMES),
  sqs: Object.keys(SQS_CONSUMER_EVENT_NAMES),
  rabbitmq: Object.keys(RABBIT_CONSUMER_EVENT_NAMES),
  nats: Object.keys(NATS_CONSUMER_EVENT_NAMES),
};
const all = new Set([...core, ...Object.values(byBroker).flat()]);

/** The event names a page may mention: its broker's and core's, or every one. */
function allowedFor(file: string): Set<string> {
  const broker = Object.keys(byBroker).find((b) => file.includes(`/${b}`) || file.includes(`${b}.md`));
  return broker === undefined ? all : new Set([...core, ...(byBroker[broker] ?? [])]);
}

/** What looks like an event name: `prefix:rest` with a prefix an event has, or was ever given. */
const PREFIXES = new Set(
  [...all, 'dead-letter:failed'].filter((n) => n.includes(':')).map((n) => n.split(':')[0] ?? ''),
);

/** Event names a Markdown text mentions: event tables' first column, `prefix:name` tokens, `.on('x'`. */
function eventNamesIn(md: string): { line: number; name: string }[] {
  const found: { line: number; name: string }[] = [];
  let eventTable = false;
  md.split('\n').forEach((text, i) => {
    const line = i + 1;
    if (/^\|\s*event\s*\|/i.test(text)) eventTable = true;
    else if (!text.startsWith('|')) eventTable = false;
    else if (eventTable && !/^\|\s*-/.test(text)) {
      const first = text.split('|')[1] ?? '';
      for (const m of first.matchAll(/`([^`]+)`/g)) found.push({ line, name: m[1] ?? '' });
    }
    for (const m of text.matchAll(/`([a-z-]+:[a-z:-]+)`/g)) {
      if (PREFIXES.has(m[1]?.split(':')[0] ?? '')) found.push({ line, name: m[1] ?? '' });
    }
    for (const m of text.matchAll(/\.on\(\s*'([^']+)'/g)) found.push({ line, name: m[1] ?? '' });
  });
  const seen = new Set<string>();
  return found.filter((f) => !seen.has(`${f.line} ${f.name}`) && seen.add(`${f.line} ${f.name}`));
}

function markdownFiles(): string[] {
  return docFiles(root, { tree: ['docs'] }).filter((f) => !f.startsWith('docs/history'));
}

it('finds names in event tables, prefix tokens and on() calls', () => {
  const md = [
    '| event | meaning |',
    '|---|---|',
    '| `dead-letter` | old |',
    '| `consumer:paused` / `consumer:resumed` | x |',
    '',
    "watch `message:retry` and `node:http` and `dead-letter:failed`; consumer.on('settled', f)",
  ].join('\n');
  expect(eventNamesIn(md).map((f) => f.name)).toEqual([
    'dead-letter',
    'consumer:paused',
    'consumer:resumed',
    'message:retry',
    'dead-letter:failed',
    'settled',
  ]);
});

it('every event name the docs mention is emitted by the code', () => {
  const bad: string[] = [];
  let checked = 0;
  for (const file of markdownFiles()) {
    const allowed = allowedFor(file);
    for (const { line, name } of eventNamesIn(readFileSync(join(root, file), 'utf8'))) {
      checked++;
      if (!allowed.has(name)) bad.push(`${file}:${line}: '${name}'`);
    }
  }
  expect(checked).toBeGreaterThan(50);
  expect(bad.join('\n')).toBe('');
});
