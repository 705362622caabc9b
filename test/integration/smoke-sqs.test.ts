import {
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, it } from 'vitest';
import { serviceUrls, uniqueName } from '../support/index.js';

// A FIFO round trip against ElasticMQ with @aws-sdk/client-sqs 3.x, which speaks the JSON
// protocol: this fails on ElasticMQ releases too old to understand it.
const sqs = new SQSClient({
  endpoint: serviceUrls().sqsEndpoint,
  region: 'us-east-1',
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
});
let queueUrl: string | undefined;

afterAll(async () => {
  if (queueUrl) await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
  sqs.destroy();
});

describe('sqs smoke', () => {
  it('sends, receives and deletes on a FIFO queue', async () => {
    const created = await sqs.send(
      new CreateQueueCommand({ QueueName: `${uniqueName('smoke')}.fifo`, Attributes: { FifoQueue: 'true' } }),
    );
    queueUrl = created.QueueUrl!;
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: 'hello',
        MessageGroupId: 'g1',
        MessageDeduplicationId: 'd1',
      }),
    );
    const { Messages } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 5 }),
    );
    expect(Messages?.map((m) => m.Body)).toEqual(['hello']);
    await sqs.send(
      new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: Messages![0]!.ReceiptHandle! }),
    );
    const after = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, WaitTimeSeconds: 1 }));
    expect(after.Messages ?? []).toEqual([]);
  });
});
