import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type ChildLine, startChild } from '../../support/index.js';
import { BROKERS } from './brokers.js';
import { distinctEffects } from './harness.js';
import { messagesOf, useBroker, waitUntilDone } from './suite.js';

// A consumer process is SIGKILLed mid-run, at the worst moment: right after a message's
// transaction committed and before the broker heard of it (no ack, no offset commit, no delete).
// The kill is real (a child process, fixtures/consumer-child.mjs, sends SIGKILL to itself from
// the inbox's `message:processed` event), so no stop() or cleanup runs. A new consumer process
// then finishes the destination: every id has exactly one effect, none is lost, and the message
// the first one died on comes back and is recognised as a duplicate.

const script = fileURLToPath(new URL('./fixtures/consumer-child.mjs', import.meta.url));
const event = (name: string) => (l: ChildLine) => (l.json as { event?: string } | undefined)?.event === name;

describe.each(BROKERS)('%s: redelivery after a crash', (broker, make) => {
  crashScenario(broker, make, undefined);
});

// The same with a handler bound to an ORM that owns its transaction (@once/core/prisma,
// @once/core/typeorm): settled only after the ORM's COMMIT resolved, on one broker.
const rabbitmq = BROKERS.find(([b]) => b === 'rabbitmq')!;
describe.each(['prisma', 'typeorm'] as const)(
  'rabbitmq with a %s handler: redelivery after a crash',
  (orm) => {
    crashScenario(rabbitmq[0], rabbitmq[1], orm);
  },
);

function crashScenario(
  broker: (typeof BROKERS)[number][0],
  make: (typeof BROKERS)[number][1],
  orm: 'prisma' | 'typeorm' | undefined,
): void {
  const tag = orm ? `${broker}_${orm}` : broker;
  const t = useBroker(`conf_crash_${tag}`, make);

  it('SIGKILL between commit and settle, a new consumer finishes: one effect per id, none lost', async () => {
    const { harness, db } = t;
    const dest = await harness.create(`conf-crash-${tag.replace('_', '-')}`);
    const ledger = await db.ledger();
    const messages = messagesOf(dest, 60, 4);
    await harness.publish(dest, messages);
    const env = (killAfterProcessed: number) => ({
      CONFORMANCE_CHILD: JSON.stringify({
        settings: harness.childConfig(dest, 'crash'),
        consumer: 'crash',
        schema: db.schema,
        ledgerTable: ledger.table,
        handlerDelayMs: 5,
        killAfterProcessed,
        ...(orm ? { orm } : {}),
      }),
      // Prisma's generated client is TypeScript.
      ...(orm === 'prisma' ? { NODE_OPTIONS: '--import jiti/register' } : {}),
    });

    const first = startChild({ script, env: env(20) });
    expect(await first.waitForExit(60_000)).toMatchObject({ signal: 'SIGKILL' });
    const dying = first.lines.find(event('dying'));
    expect(dying, first.stderr).toBeDefined();
    const diedOn = (dying!.json as { id: string }).id;
    // It really died mid-run: work done, work left.
    const before = await distinctEffects(ledger);
    expect(before).toBeGreaterThanOrEqual(20);
    expect(before).toBeLessThan(messages.length);

    const second = startChild({ script, env: env(0) });
    await waitUntilDone(harness, dest, 'crash', ledger, messages.length, 90_000);
    expect(await second.kill('SIGTERM')).toMatchObject({ code: 0 });

    expect(await harness.settled(dest, 'crash')).toBe(true);
    const verdict = await ledger.check({ expectedIds: messages.map((m) => m.id) });
    expect(verdict.lost).toEqual([]);
    expect(verdict.duplicated).toEqual([]);
    expect(verdict.unexpected).toEqual([]);
    expect(verdict.ok).toBe(true);
    const duplicates = second.lines.filter(event('duplicate')).map((l) => (l.json as { id: string }).id);
    expect(duplicates).toContain(diedOn);
  });
}
