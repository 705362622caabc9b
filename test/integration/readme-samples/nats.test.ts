import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { serviceUrls, sleep, uniqueName, waitFor } from '../../support/index.js';
import { type BrokerSide, runSample } from './harness.js';

// packages/nats/README.md's first sample, run as a program against the real nats-server and fed
// by a plain `@nats-io/jetstream` producer: with the `Nats-Msg-Id` header (`msgID`; the sample's
// idOf line deleted, as its comment says) and without any id header (the sample's idOf). Before
// the program starts, the test makes the stream the sample's comment asks for, capturing the
// consumed subject and the dead-letter subject.
//
// JetStream drops a publish whose `Nats-Msg-Id` it saw within the stream's `duplicate_window`, so
// a producer's quick re-send never reaches a consumer. This stream's window is the shortest the
// server takes (100 ms), and a re-send that is still dropped (PubAck `duplicate: true`) is
// published again after a pause: every re-send is stored and delivered, and once must drop it.
const DUPLICATE_WINDOW_NS = 100_000_000;
const jsName = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_');

async function natsSide(): Promise<BrokerSide & { consumer: string }> {
  const stream = jsName(uniqueName('readme-orders'));
  const consumer = jsName(uniqueName('readme-billing'));
  const subject = `${stream}.in`;
  const dead = `${stream}.dead`;
  const nc = await connect({ servers: serviceUrls().natsUrl, name: uniqueName('readme-producer') });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({
    name: stream,
    subjects: [`${subject}.>`, dead],
    duplicate_window: DUPLICATE_WINDOW_NS,
  });
  let sent = 0;
  let droppedByJetStream = 0;
  const settled = async () => {
    const info = await jsm.consumers.info(stream, consumer).catch(() => undefined);
    return info !== undefined && info.num_pending === 0 && info.num_ack_pending === 0;
  };
  return {
    consumer,
    replace: [
      [`servers: 'nats://127.0.0.1:4222'`, `servers: '${serviceUrls().natsUrl}'`],
      [`subject: 'orders.>'`, `subject: '${subject}.>'`],
      [`deadLetterSubject: 'dead.orders'`, `deadLetterSubject: '${dead}'`],
      [`consumer: 'billing'`, `consumer: '${consumer}'`],
    ],
    async send(messages, withIdHeader) {
      for (const m of messages) {
        const opts = withIdHeader ? { msgID: m.id } : {};
        // Up to 5 s for JetStream to forget the id of a re-send (its window is 100 ms).
        for (let tries = 0; ; tries++) {
          const ack = await js.publish(`${subject}.placed`, m.body, opts);
          if (!ack.duplicate) break;
          droppedByJetStream++;
          if (tries >= 50) throw new Error(`JetStream still drops a re-send of ${m.id} as a duplicate`);
          await sleep(100);
        }
        sent++;
      }
    },
    drained: () => waitFor(`durable ${consumer} to ack everything in ${stream}`, settled),
    async checkAfterExit() {
      expect(await settled(), 'nothing pending or unacked').toBe(true);
      // Each send, re-sends included, is one stored message (the 30 ids and 7 re-sends); a dead
      // letter would be one more.
      expect(sent).toBe(37);
      expect((await jsm.streams.info(stream)).state.messages, 'nothing dead-lettered').toBe(sent);
      console.log(
        `${stream}: ${sent} messages stored; ${droppedByJetStream} re-sends JetStream dropped first`,
      );
    },
    async cleanup() {
      await jsm.streams.delete(stream).catch(() => {});
      await nc.close().catch(() => {});
    },
  };
}

describe('README samples, NATS JetStream', () => {
  for (const variant of ['idOf', 'header'] as const) {
    it(`packages/nats/README.md nats-readme, ${variant === 'idOf' ? 'no id header: idOf' : 'Nats-Msg-Id header'}`, async () => {
      const broker = await natsSide();
      await runSample({
        readme: 'packages/nats/README.md',
        marker: 'nats-readme',
        table: 'charges',
        consumer: broker.consumer,
        bodyOf: (id, n) => JSON.stringify({ orderId: id, amount: n }),
        variant,
        broker,
      });
    });
  }
});
