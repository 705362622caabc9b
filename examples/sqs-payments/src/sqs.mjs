// @ts-check
// The SQS client and queues, configured by environment (ElasticMQ on loopback by default).
import { CreateQueueCommand, DeleteQueueCommand, SQSClient } from '@aws-sdk/client-sqs';

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const SQS_ENDPOINT = process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324';

/** An SQS client for the local endpoint (ElasticMQ accepts any credentials). */
export function sqsClient() {
  return new SQSClient({
    endpoint: SQS_ENDPOINT,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
}

/**
 * Creates a FIFO queue (`name` must end in `.fifo`) and returns its URL.
 * @param {SQSClient} client
 * @param {string} name
 */
export async function createFifoQueue(client, name) {
  const res = await client.send(
    new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: 'true' } }),
  );
  if (!res.QueueUrl) throw new Error(`CreateQueue ${name} returned no QueueUrl`);
  return res.QueueUrl;
}

/**
 * @param {SQSClient} client
 * @param {string[]} urls
 */
export async function deleteQueues(client, urls) {
  for (const url of urls) await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
}
