import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { serviceUrls, sleep, uniqueName, waitFor } from '../../support/index.js';
import { type BrokerSide, runSample } from './harness.js';

// packages/nats/README.md's first sample, run as a program exactly as written against the real
// nats-server and fed by a plain `@nats-io/jetstream` producer: with the `Nats-Msg-Id` header
// (`msgID`; the sample's idOf line deleted, as its comment says) and without any id header (the
// sample's idOf). Before the program starts, the test deletes what an earlier run left and makes
// the stream the sample's comment asks for (`ORDERS`, capturing `orders.>` and `dead.orders`).
//
// JetStream drops a publish whose `Nats-Msg-Id` it saw within the stream's `duplicate_window`, so
// a producer's quick re-send never reaches a consumer. This stream's window is the shortest the
// server takes (100 ms), and a re-send that is still dropped (PubAck `duplicate: true`) is
// published again after a pause: every re-send is stored and delivered, and once must drop it.
const DUPLICATE_WINDOW_NS = 100_000_000;
// As written in the sample.
const STREAM = 'ORDERS';
const SUBJECTS = ['orders.>', 'dead.orders'];
const CONSUMER = 'inventory';

async function natsSide(): Promise<BrokerSide> {
  const nc = await connect({ servers: serviceUrls().natsUrl, name: uniqueName('readme-producer') });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  let sent = 0;
  let droppedByJetStream = 0;
  const settled = async () => {
    const info = await jsm.consumers.info(STREAM, CONSUMER).catch(() => undefined);
    return info !== undefined && info.num_pending === 0 && info.num_ack_pending === 0;
  };
  return {
    replace: [],
    env: { NATS_URL: serviceUrls().natsUrl },
    async prepare() {
      await jsm.streams.delete(STREAM).catch(() => {});
      await jsm.streams.add({ name: STREAM, subjects: SUBJECTS, duplicate_window: DUPLICATE_WINDOW_NS });
    },
    async send(messages, withIdHeader) {
      for (const m of messages) {
        const opts = withIdHeader ? { msgID: m.id } : {};
        // Up to 5 s for JetStream to forget the id of a re-send (its window is 100 ms).
        for (let tries = 0; ; tries++) {
          const ack = await js.publish('orders.placed', m.body, opts);
          if (!ack.duplicate) break;
          droppedByJetStream++;
          if (tries >= 50) throw new Error(`JetStream still drops a re-send of ${m.id} as a duplicate`);
          await sleep(100);
        }
        sent++;
      }
    },
    drained: () => waitFor(`durable ${CONSUMER} to ack everything in ${STREAM}`, settled),
    async checkAfterExit() {
      expect(await settled(), 'nothing pending or unacked').toBe(true);
      // Each send, re-sends included, is one stored message (the 30 ids and 7 re-sends); a dead
      // letter would be one more.
      expect(sent).toBe(37);
      expect((await jsm.streams.info(STREAM)).state.messages, 'nothing dead-lettered').toBe(sent);
      console.log(
        `${STREAM}: ${sent} messages stored; ${droppedByJetStream} re-sends JetStream dropped first`,
      );
    },
    async cleanup() {
      await jsm.streams.delete(STREAM).catch(() => {});
      await nc.close().catch(() => {});
    },
  };
}

describe('README samples, NATS JetStream', () => {
  for (const variant of ['idOf', 'header'] as const) {
    it(`packages/nats/README.md nats-readme, ${variant === 'idOf' ? 'no id header: idOf' : 'Nats-Msg-Id header'}`, async () => {
      await runSample({
        readme: 'packages/nats/README.md',
        marker: 'nats-readme',
        table: 'reservations',
        consumer: CONSUMER,
        bodyOf: (id, n) => JSON.stringify({ orderId: id, quantity: n }),
        variant,
        broker: await natsSide(),
      });
    });
  }
});
