import { afterAll, beforeAll } from 'vitest';
import { killAllChildren, type Ledger } from '../../support/index.js';
import {
  type BrokerHarness,
  type ConformanceDb,
  conformanceDb,
  type Destination,
  distinctEffects,
  waitFor,
} from './harness.js';

/** The harness and database of one broker's `describe` block, live between its hooks. */
export interface BrokerUnderTest {
  readonly db: ConformanceDb;
  readonly harness: BrokerHarness;
}

/**
 * Registers the hooks of one broker's block: a schema of its own, a harness on it, and in
 * `afterAll` children killed, consumers stopped, destinations deleted, the schema dropped.
 */
export function useBroker(prefix: string, make: (db: ConformanceDb) => BrokerHarness): BrokerUnderTest {
  let db: ConformanceDb | undefined;
  let harness: BrokerHarness | undefined;
  beforeAll(async () => {
    db = await conformanceDb(prefix);
    harness = make(db);
  });
  afterAll(async () => {
    await killAllChildren();
    await harness?.close();
    await db?.close();
  });
  return {
    get db() {
      if (!db) throw new Error('useBroker: the database is only there inside tests');
      return db;
    },
    get harness() {
      if (!harness) throw new Error('useBroker: the harness is only there inside tests');
      return harness;
    },
  };
}

/**
 * Waits until `count` distinct ids have an effect and the broker says consumer `consumer` settled
 * everything: effects alone could be complete while copies are still to be delivered.
 */
export async function waitUntilDone(
  harness: BrokerHarness,
  dest: Destination,
  consumer: string,
  ledger: Ledger,
  count: number,
  timeoutMs = 60_000,
): Promise<void> {
  await waitFor(
    `${count} distinct effects and every message of ${dest.name} settled`,
    async () => (await distinctEffects(ledger)) >= count && (await harness.settled(dest, consumer)),
    timeoutMs,
  );
}

/** `n` ids named after the destination, keyed round-robin over `keys` keys. */
export function messagesOf(dest: Destination, n: number, keys: number) {
  return Array.from({ length: n }, (_, i) => {
    const id = `${dest.name}-${i}`;
    return { id, key: `k${i % keys}`, body: JSON.stringify({ id, n: i }) };
  });
}
