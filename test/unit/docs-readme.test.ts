import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

// The root README is for users first: it opens with what once does and an `npm install`, then the
// first consumer; what the repository's own tests need (Java, Maven, PgBouncer) comes after, under
// the contributors' heading.
const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');

it('opens with npm install and the first consumer; the contributors’ prerequisites come later', () => {
  const headings = [...readme.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
  expect(headings[0]).toBe('A first consumer');
  const firstBlock = /```(\w*)\n([^\n]*)/.exec(readme);
  expect(firstBlock?.[2]).toMatch(/^npm install @once\/core /);
  const contributors = readme.indexOf('## Working on this repository');
  expect(contributors).toBeGreaterThan(readme.indexOf('## A first consumer'));
  for (const word of ['Java 17', 'Maven', 'apt-get install -y pgbouncer', 'npm run demo', 'npm test']) {
    expect(readme.indexOf(word), `${word} before the contributors' heading`).toBeGreaterThan(contributors);
  }
  expect(readme.slice(0, readme.indexOf('## A first consumer'))).toMatch(/ids? of the producer's choosing/i);
});

it('says where a NATS user starts that a new durable reads the whole stream, unlike a new Kafka group', () => {
  const nats = readFileSync(fileURLToPath(new URL('../../packages/nats/README.md', import.meta.url)), 'utf8');
  const guide = readFileSync(fileURLToPath(new URL('../../docs/nats.md', import.meta.url)), 'utf8');
  const natsSample = readme.slice(readme.indexOf("from '@once/nats'"));
  const flat = (t: string) => t.replace(/\n\s*(\/\/)?\s*/g, ' ');
  for (const text of [natsSample, nats, guide].map(flat)) {
    expect(text).toMatch(/reads the stream from its first message/);
    expect(text).toMatch(/Kafka group/);
  }
  // And the guide's first step installs the NATS packages.
  expect(guide).toMatch(
    /npm install @once\/core @once\/nats @nats-io\/transport-node @nats-io\/jetstream pg/,
  );
});

it('claims nothing about the Node version the tests run that the repository contradicts', () => {
  const transactions = readFileSync(
    fileURLToPath(new URL('../../docs/transactions.md', import.meta.url)),
    'utf8',
  );
  expect(transactions).not.toMatch(/run Node 20/);
});

it('docs/core.md documents jsonHandler with a sample', () => {
  const core = readFileSync(fileURLToPath(new URL('../../docs/core.md', import.meta.url)), 'utf8');
  expect(core).toMatch(/^#+ .*`jsonHandler`/m);
  expect(core).toMatch(/handler: jsonHandler\(/);
});

it('docs/http.md shows the Fetch binding on Hono, with the request Hono has not read', () => {
  const http = readFileSync(fileURLToPath(new URL('../../docs/http.md', import.meta.url)), 'utf8');
  expect(http).toMatch(/from 'hono'/);
  expect(http).toMatch(/createCharge\(c\.req\.raw\)/);
});

it('packages/core/README.md declares the envelope it processes', () => {
  const core = readFileSync(fileURLToPath(new URL('../../packages/core/README.md', import.meta.url)), 'utf8');
  const use = core.slice(core.indexOf('## Use'));
  const block = use.slice(use.indexOf('```ts'), use.indexOf('```', use.indexOf('```ts') + 5));
  expect(block).toMatch(/inbox\.process\(envelope\)/);
  expect(block).toMatch(/const envelope = \{/);
});
