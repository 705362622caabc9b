import { describe, expect, it } from 'vitest';
import { queues, sendAll, sqsClient } from '../../../packages/sqs/test/integration/fixtures/env.js';
import { serviceUrls, uniqueName, waitFor } from '../../support/index.js';
import { type BrokerSide, runSample } from './harness.js';

// packages/sqs/README.md's first sample, run as a program against ElasticMQ and fed by plain
// SendMessageBatch calls: with the `message-id` attribute (the sample's idOf line deleted, as its
// comment says) and without one (the sample's idOf). Written as it is but for the queue URLs. The sample's client takes its endpoint and
// credentials from the SDK's own environment variables, as it would on AWS.
const AS_WRITTEN = 'https://sqs.eu-west-1.amazonaws.com/123456789012';

async function sqsSide(): Promise<BrokerSide> {
  const client = sqsClient();
  const made = queues(client);
  const name = uniqueName('readme-pay');
  const queueUrl = await made.create(`${name}.fifo`);
  const dlqUrl = await made.create(`${name}-dlq.fifo`);
  let sends = 0;
  return {
    // AWS's queue URLs cannot exist here: the only change to the sample as written.
    replace: [
      [`'${AS_WRITTEN}/payments.fifo'`, `'${queueUrl}'`],
      [`'${AS_WRITTEN}/payments-dlq.fifo'`, `'${dlqUrl}'`],
    ],
    env: {
      AWS_ENDPOINT_URL_SQS: serviceUrls().sqsEndpoint,
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
    },
    async send(messages, withIdHeader) {
      // A producer's re-send is a new send to SQS (a new deduplication id): the broker delivers it.
      await sendAll(
        client,
        queueUrl,
        messages.map((m) => ({
          body: m.body,
          group: `g${m.id.length % 3}`,
          dedup: `send-${++sends}`,
          ...(withIdHeader ? { id: m.id } : {}),
        })),
      );
    },
    drained: () => waitFor(`${queueUrl} to be empty`, async () => (await made.depth(queueUrl)) === 0),
    async checkAfterExit() {
      expect(await made.depth(queueUrl), 'the queue is empty').toBe(0);
      expect(await made.depth(dlqUrl), 'nothing dead-lettered').toBe(0);
    },
    async cleanup() {
      await made.drop();
      client.destroy();
    },
  };
}

describe('README samples, SQS', () => {
  for (const variant of ['idOf', 'header'] as const) {
    it(`packages/sqs/README.md sqs-readme, ${variant === 'idOf' ? 'no id attribute: idOf' : 'message-id attribute'}`, async () => {
      const broker = await sqsSide();
      await runSample({
        readme: 'packages/sqs/README.md',
        marker: 'sqs-readme',
        table: 'payments',
        consumer: 'billing.payments', // as written
        bodyOf: (id, n) => JSON.stringify({ id, amount: n }),
        variant,
        broker,
      });
    });
  }
});
