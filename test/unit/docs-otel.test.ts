import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { filesUnder } from './doc-samples.js';

// packages/otel/README.md says which events `instrument` reads. Each event name it gives
// (`message:dead-lettered`, `outbox:published`, ...) must be one a package's source declares, and
// it names no event of SQS's that no longer exists (`dead-letter`, issue #29).
const root = fileURLToPath(new URL('../../', import.meta.url));

it('the otel README names only events the packages declare', () => {
  const readme = readFileSync(join(root, 'packages/otel/README.md'), 'utf8');
  const src = readdirSync(join(root, 'packages'))
    .flatMap((p) => filesUnder(root, `packages/${p}/src`, '.ts'))
    .map((f) => readFileSync(join(root, f), 'utf8'))
    .join('\n');
  const named = [...new Set([...readme.matchAll(/`([a-z]+:[a-z:-]+)`/g)].map((m) => m[1]!))];
  expect(named).toContain('message:dead-lettered');
  const unknown = named.filter((n) => !src.includes(`'${n}'`));
  expect(unknown).toEqual([]);
  expect(readme).not.toMatch(/SQS's `dead-letter`|RabbitMQ's\s+`settled`/);
});

it("the otel README's setup is today's SDK: NodeSDK's metricReaders, SDK 3's sdk-trace, a program peers-check/otel runs", () => {
  const readme = readFileSync(join(root, 'packages/otel/README.md'), 'utf8');
  expect(readme).toMatch(/metricReaders: \[/);
  expect(readme).not.toMatch(/as `metricReader` of `NodeSDK`/);
  expect(readme).toMatch(/^<!-- sample: otel-setup\b/m);
  expect(readme).toMatch(/from '@opentelemetry\/sdk-trace';/);
  expect(readFileSync(join(root, 'scripts/peers-check/run'), 'utf8')).toMatch(/\$HERE\/otel/);
});
