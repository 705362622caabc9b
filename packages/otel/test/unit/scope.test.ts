import { readFileSync } from 'node:fs';
import { createInbox } from '@once/core';
import { type Meter, type MeterProvider, metrics } from '@opentelemetry/api';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { instrument } from '../../src/index.js';

// The meter's instrumentation scope names this package and its version (issue #29: the version
// was undefined). The provider records what instrument() asks it for; nothing connects.
const pool = new pg.Pool({ max: 1 });
afterAll(() => pool.end());

it("instrument() asks for its meter with this package's name and version", () => {
  const asked: [string, string | undefined][] = [];
  const meterProvider: MeterProvider = {
    getMeter(name: string, version?: string): Meter {
      asked.push([name, version]);
      return metrics.getMeterProvider().getMeter(name, version); // the API's no-op meter
    },
  };
  const inbox = createInbox({ pool, consumer: 'scope-check', handler: () => {} });
  instrument(inbox, { meterProvider, pool: false }).close();
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  expect(asked).toEqual([['@once/otel', version]]);
});
