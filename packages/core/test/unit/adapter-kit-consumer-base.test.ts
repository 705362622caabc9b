import { expect, it } from 'vitest';
import { ConsumerBase, type ConsumerHealth } from '../../src/adapter/index.js';
import { ErrorCode } from '../../src/errors.js';
import { LATEST_SCHEMA_VERSION } from '../../src/schema/migrations.js';

/**
 * A pool that answers the schema check and nothing else is asked of it here. once sends it on a
 * connection of the pool, under its statement bound (bounded-pool.ts).
 */
const schemaCheck = async () => ({ rows: [{ version: LATEST_SCHEMA_VERSION }], rowCount: 1 });
const pool = {
  query: schemaCheck,
  connect: async () => ({ query: schemaCheck, release: () => {} }),
};

/** The smallest adapter: it only logs the hooks the base calls. */
class TestConsumer extends ConsumerBase<unknown> {
  protected readonly ownEventNames = {};
  readonly log: string[] = [];

  constructor() {
    super({
      name: 'once/test',
      inbox: { pool: pool as never, consumer: 'base-test', handler: () => {}, logger: false },
      stopTimeoutMs: 1_000,
    });
  }

  protected async open(): Promise<void> {
    this.log.push(`open fetching=${this.life.fetching}`);
  }
  protected pause(): void {
    this.log.push('pause');
  }
  protected resume(): void {
    this.log.push('resume');
  }
  protected async drain(): Promise<void> {
    this.log.push('drain');
  }
  protected async close(): Promise<void> {
    this.log.push('close');
  }
  health(): ConsumerHealth {
    return this.life.health(true);
  }
}

it('ConsumerBase: the Consumer methods over the lifecycle; the adapter writes only its hooks', async () => {
  const c = new TestConsumer();
  expect(c.inbox.options.consumer).toBe('base-test');
  expect(c.state).toBe('idle');
  const states: string[] = [];
  const off = c.on('consumer:state', (e) => states.push(e.state));
  await c.start();
  expect(c.state).toBe('running');
  expect(c.health()).toMatchObject({ state: 'running', healthy: true, available: true });
  await expect(c.start()).rejects.toMatchObject({ code: ErrorCode.Closed });
  await c[Symbol.asyncDispose]();
  await c.stop();
  off();
  expect(c.state).toBe('stopped');
  expect(c.log).toEqual(['open fetching=true', 'drain', 'close']);
  expect(states).toEqual(['starting', 'running', 'stopping', 'stopped']);
});

it("ConsumerBase.on refuses a name neither the kit's map nor the adapter's has (UNKNOWN_EVENT)", () => {
  const c = new TestConsumer();
  expect(() => c.on('dead-letter' as never, () => {})).toThrow(
    expect.objectContaining({
      code: 'UNKNOWN_EVENT',
      message: expect.stringMatching(
        /^TestConsumer\.on: 'dead-letter' is not an event of TestConsumer; use 'message:dead-lettered'/,
      ),
    }),
  );
  expect(() => c.on('message:processed' as never, () => {})).toThrow(
    /consumer\.inbox\.on\('message:processed'\)/,
  );
  for (const name of ['consumer:state', 'consumer:paused', 'message:dead-lettered', 'error'] as const) {
    expect(() => c.on(name, () => {})).not.toThrow();
  }
});
