import { OnceError } from '@once/core';
import { describe, expect, it } from 'vitest';
import { createKafkaPublisher, type KafkaLike } from '../../src/index.js';

/**
 * A fake of our own KafkaLike (the broker side is tested in test/integration): each producer it
 * makes acknowledges `sendBatch` as `ack` says, or never.
 */
function fakeKafka(ack: (producer: number) => boolean) {
  const producers: { connected: boolean; disconnected: boolean; sent: number }[] = [];
  const kafka = {
    producer() {
      const n = producers.length;
      const state = { connected: false, disconnected: false, sent: 0 };
      producers.push(state);
      return {
        async connect() {
          state.connected = true;
        },
        async disconnect() {
          state.disconnected = true;
        },
        sendBatch() {
          state.sent++;
          return ack(n) ? Promise.resolve([]) : new Promise(() => {});
        },
      };
    },
  } as unknown as KafkaLike;
  return { kafka, producers };
}

describe('KafkaPublisher and the relay signal', () => {
  it('an abort ends a publish Kafka never acknowledges, and the next publish uses a fresh producer', async () => {
    const { kafka, producers } = fakeKafka((n) => n > 0);
    const publisher = createKafkaPublisher({ kafka });
    const controller = new AbortController();
    const reason = new OnceError('PUBLISH_TIMEOUT', 'deadline', { retryable: true });
    const message = { id: 'm1', destination: 't', body: Buffer.from('x') };
    const publishing = publisher.publish([message], { signal: controller.signal });
    await new Promise((r) => setTimeout(r, 20));
    controller.abort(reason);
    await expect(publishing).rejects.toBe(reason);
    // The producer with the request in flight is gone: no late ack can be taken for a new one's.
    expect(producers[0]).toMatchObject({ sent: 1, disconnected: true });
    expect(await publisher.publish([message], { signal: new AbortController().signal })).toEqual([
      { id: 'm1', ok: true },
    ]);
    expect(producers).toHaveLength(2);
    expect(producers[1]).toMatchObject({ connected: true, sent: 1, disconnected: false });
    await publisher.stop();
    expect(producers[1]!.disconnected).toBe(true);
  });

  it('an already aborted signal publishes nothing', async () => {
    const { kafka, producers } = fakeKafka(() => true);
    const publisher = createKafkaPublisher({ kafka });
    const controller = new AbortController();
    controller.abort(new OnceError('PUBLISH_TIMEOUT', 'deadline'));
    await expect(
      publisher.publish([{ id: 'm1', destination: 't', body: 'x' }], { signal: controller.signal }),
    ).rejects.toMatchObject({ code: 'PUBLISH_TIMEOUT' });
    expect(producers.every((p) => p.sent === 0)).toBe(true);
    await publisher.stop();
  });
});
