import { randomUUID } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { DEAD_LETTER_RECORD } from '@once/core/adapter';
import { createSqsConsumer, jsonHandler, type SqsConsumer } from '@once/sqs';
import { serviceUrls, uniqueName } from '../../support/index.js';
import {
  type BrokerHarness,
  type ConformanceDb,
  type ConsumerSpec,
  type DeadLetterCopy,
  type DeadLetterDetail,
  type Destination,
  deadLetterWhy,
  inboxOptionsOf,
  type OutMessage,
  startTracked,
} from './harness.js';

/**
 * Settings shared with fixtures/consumer-child.mjs: short long-polls so stop() is quick, and a
 * short visibility timeout so what a crashed consumer held comes back within seconds.
 */
export const SQS_CONSUMER_SETTINGS = Object.freeze({ waitTimeSeconds: 1, visibilityTimeoutS: 3 });

interface SqsDestination extends Destination {
  readonly url: string;
  readonly dlqUrl: string;
}

/** SQS (ElasticMQ): a FIFO queue and a FIFO dead-letter queue, consumed by createSqsConsumer. */
export function sqsHarness(db: ConformanceDb): BrokerHarness {
  const client = new SQSClient({
    endpoint: serviceUrls().sqsEndpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const urls: string[] = [];
  const running = new Set<SqsConsumer>();
  const queueOf = (dest: Destination) => dest as SqsDestination;
  const createQueue = async (name: string) => {
    const res = await client.send(
      new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: 'true', VisibilityTimeout: '10' } }),
    );
    urls.push(res.QueueUrl!);
    return res.QueueUrl!;
  };

  async function deadLetterDetails(
    dest: Destination,
    count: number,
    timeoutMs = 30_000,
  ): Promise<DeadLetterDetail[]> {
    const got: DeadLetterDetail[] = [];
    const until = Date.now() + timeoutMs;
    while (got.length < count && Date.now() < until) {
      const res = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: queueOf(dest).dlqUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageAttributeNames: ['All'],
        }),
      );
      const messages = res.Messages ?? [];
      for (const m of messages) {
        const a = m.MessageAttributes ?? {};
        const id = a['message-id']?.StringValue;
        got.push({
          id,
          rawId: id === undefined ? undefined : Buffer.from(id),
          body: Buffer.from(m.Body ?? ''),
          ...deadLetterWhy(a[DEAD_LETTER_RECORD]?.StringValue),
        });
      }
      if (messages.length > 0) {
        await client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: queueOf(dest).dlqUrl,
            Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
          }),
        );
      }
    }
    return got;
  }

  return {
    broker: 'sqs',
    async create(prefix) {
      const name = uniqueName(prefix);
      const url = await createQueue(`${name}.fifo`);
      const dlqUrl = await createQueue(`${name}-dlq.fifo`);
      return { name, url, dlqUrl } satisfies SqsDestination;
    },

    async publish(dest, messages) {
      // Every send gets its own deduplication id: ElasticMQ's FIFO dedup differs from AWS's
      // (docs/pitfalls.md S3), and a copy the broker swallowed would prove nothing about the adapter.
      for (let i = 0; i < messages.length; i += 10) {
        const res = await client.send(
          new SendMessageBatchCommand({
            QueueUrl: queueOf(dest).url,
            Entries: messages.slice(i, i + 10).map((m, k) => ({
              Id: String(k),
              MessageBody: m.body.toString(),
              MessageGroupId: m.key,
              MessageDeduplicationId: randomUUID(),
              MessageAttributes: attributesOf(m),
            })),
          }),
        );
        if (res.Failed?.length) throw new Error(`SendMessageBatch failed: ${JSON.stringify(res.Failed)}`);
      }
    },

    async start(dest, spec: ConsumerSpec) {
      const consumer = createSqsConsumer({
        client,
        queueUrl: queueOf(dest).url,
        deadLetterQueueUrl: queueOf(dest).dlqUrl,
        pool: db.pool,
        schema: db.schema,
        consumer: spec.consumer,
        handler: spec.handler,
        ...SQS_CONSUMER_SETTINGS,
        ...inboxOptionsOf(spec.options),
        ...(spec.options?.batch === undefined ? {} : { batch: spec.options.batch }),
      });
      return startTracked(consumer, spec, running);
    },

    balanced: () => true,

    async settled(dest) {
      // A message leaves the queue only when deleted, i.e. settled; in flight still counts.
      const res = await client.send(
        new GetQueueAttributesCommand({ QueueUrl: queueOf(dest).url, AttributeNames: ['All'] }),
      );
      const a = res.Attributes ?? {};
      const left =
        Number(a.ApproximateNumberOfMessages ?? 0) +
        Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
        Number(a.ApproximateNumberOfMessagesDelayed ?? 0);
      return left === 0;
    },

    async deadLetters(dest, count, timeoutMs = 30_000): Promise<DeadLetterCopy[]> {
      return (await deadLetterDetails(dest, count, timeoutMs)).map(({ id, reason }) => ({ id, reason }));
    },

    deadLetterDetails,
    jsonHandler,

    childConfig(dest) {
      return {
        broker: 'sqs',
        queueUrl: queueOf(dest).url,
        dlqUrl: queueOf(dest).dlqUrl,
        ...SQS_CONSUMER_SETTINGS,
      };
    },

    async close() {
      for (const c of running) await c.stop().catch(() => {});
      running.clear();
      for (const url of urls) await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
      client.destroy();
    },
  };
}

/** The id and headers as String message attributes: SQS attributes are text. */
function attributesOf(m: OutMessage): Record<string, { DataType: 'String'; StringValue: string }> {
  const out: Record<string, { DataType: 'String'; StringValue: string }> = {};
  const text = (name: string, v: string | Buffer) => {
    if (Buffer.isBuffer(v)) throw new Error(`sqs harness: attribute ${name} must be text, got bytes`);
    out[name] = { DataType: 'String', StringValue: v };
  };
  for (const [name, v] of Object.entries(m.headers ?? {})) text(name, v);
  if (m.id !== undefined) text('message-id', m.id);
  return out;
}
