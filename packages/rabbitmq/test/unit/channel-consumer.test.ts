import { EventEmitter } from 'node:events';
import type { Envelope, Outcome } from '@once/core';
import { Gate, silentLogger, TypedEmitter } from '@once/core/adapter';
import type { ConfirmChannel, ConsumeMessage } from 'amqplib';
import { describe, expect, it } from 'vitest';
import { ChannelConsumer, type ChannelConsumerContext } from '../../src/channel-consumer.js';
import type { RabbitConsumerEventMap } from '../../src/events.js';
import { resolveRabbitConsumerOptions } from '../../src/options.js';
import { topologyOf } from '../../src/topology.js';

const tick = () => new Promise((r) => setTimeout(r, 0));

/** A channel that records acks and hands deliveries to the consumer's callback on `deliver`. */
function fakeChannel() {
  const ch = new EventEmitter() as EventEmitter & Record<string, unknown>;
  const acks: string[] = [];
  let onMessage: ((m: ConsumeMessage | null) => void) | undefined;
  Object.assign(ch, {
    prefetch: async () => {},
    consume: async (_q: string, cb: (m: ConsumeMessage | null) => void) => {
      onMessage = cb;
      return { consumerTag: 'ctag' };
    },
    cancel: async () => {},
    close: async () => {},
    ack: (m: ConsumeMessage, allUpTo?: boolean) =>
      acks.push(`ack ${m.fields.deliveryTag}${allUpTo ? '+' : ''}`),
    nack: (m: ConsumeMessage) => acks.push(`nack ${m.fields.deliveryTag}`),
  });
  const deliver = (tag: number) =>
    onMessage?.({
      content: Buffer.from('{}'),
      fields: { deliveryTag: tag, redelivered: false, exchange: '', routingKey: 'q', consumerTag: 'ctag' },
      properties: { messageId: `m-${tag}`, headers: {} },
    } as unknown as ConsumeMessage);
  return { ch: ch as unknown as ConfirmChannel, acks, deliver };
}

function consumerOn(ch: ConfirmChannel, events: TypedEmitter<RabbitConsumerEventMap>) {
  const { rabbit } = resolveRabbitConsumerOptions({
    url: 'amqp://localhost',
    queue: 'q',
    pool: {} as never,
    handler: () => {},
    concurrency: 2,
  });
  const processed = (e: Envelope): Outcome => ({ status: 'processed', id: e.id, envelope: e }) as never;
  const ctx: ChannelConsumerContext<unknown> = {
    inbox: {
      process: async (e: Envelope) => processed(e),
      processBatch: async (es: readonly Envelope[]) => es.map(processed),
      options: { logger: silentLogger },
    } as never,
    options: rabbit,
    topology: topologyOf(rabbit),
    events,
    gate: new Gate(),
    starts: { fresh: undefined, suspect: {} },
    onLost: (err) => {
      throw err;
    },
  };
  return new ChannelConsumer(ch, ctx);
}

describe('ChannelConsumer', () => {
  it('acks processed deliveries after their outcome, in one multiple ack, and emits `settled` to a listener', async () => {
    const { ch, acks, deliver } = fakeChannel();
    const events = new TypedEmitter<RabbitConsumerEventMap>(silentLogger);
    const seen: string[] = [];
    events.on('settled', (e) => seen.push(`${e.id}:${e.status}:${e.plan}`));
    const c = consumerOn(ch, events);
    await c.open();
    await c.consume();
    for (const tag of [1, 2, 3]) deliver(tag);
    await c.drained();
    await tick();
    expect(seen.sort()).toEqual(['m-1:processed:ack', 'm-2:processed:ack', 'm-3:processed:ack']);
    // In-order multiple acks (one, as these settle in one turn), ending with the last tag.
    expect(acks.at(-1)).toBe('ack 3+');
    expect(acks.every((a) => a.endsWith('+'))).toBe(true);
    expect(c.unsettled).toBe(0);
  });

  it('builds no `settled` event when nobody listens, and still acks', async () => {
    const { ch, acks, deliver } = fakeChannel();
    const events = new TypedEmitter<RabbitConsumerEventMap>(silentLogger);
    const emitted: string[] = [];
    const emit = events.emit.bind(events);
    events.emit = ((name, event) => {
      emitted.push(String(name));
      emit(name, event);
    }) as typeof events.emit;
    const c = consumerOn(ch, events);
    await c.open();
    await c.consume();
    for (const tag of [1, 2]) deliver(tag);
    await c.drained();
    await tick();
    expect(emitted).toEqual([]);
    expect(acks.at(-1)).toBe('ack 2+');
  });
});
