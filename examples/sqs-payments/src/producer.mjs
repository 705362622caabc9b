// @ts-check
// Publishes payments to the FIFO queue, one message group per account, and then re-sends a share
// of them with the same `message-id` under a new deduplication id: the duplicates a producer
// retry or a relay restart makes after SQS's five-minute window, which SQS itself cannot catch.
//
//   node src/producer.mjs <queue-url> [count=100] [dup-share=0.25]
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { createSqsPublisher } from '@once/sqs';
import { sqsClient } from './sqs.mjs';

/** @typedef {import('./payments.mjs').Payment} Payment */
/** @typedef {{ id: string } & Payment} SentPayment */

/**
 * @param {object} o
 * @param {import('@aws-sdk/client-sqs').SQSClient} o.client
 * @param {string} o.queueUrl
 * @param {number} o.count unique payments
 * @param {number} o.dupShare share of them sent a second time with the same id
 * @param {string} o.run makes the payment ids unique to this run
 * @param {number} [o.accounts] message groups
 * @param {number} [o.malformed] extra messages whose body is not a payment (dead-lettered)
 * @returns {Promise<{ sent: number, unique: number, payments: SentPayment[], malformedIds: string[] }>}
 */
export async function publishPayments({
  client,
  queueUrl,
  count,
  dupShare,
  run,
  accounts = 20,
  malformed = 0,
}) {
  /** @type {SentPayment[]} */
  const payments = Array.from({ length: count }, (_, i) => ({
    id: `pay-${run}-${i}`,
    account: `acct-${i % accounts}`,
    cents: 100 + Math.floor(Math.random() * 9900),
  }));
  const malformedIds = Array.from({ length: malformed }, (_, i) => `pay-${run}-bad-${i}`);
  // First sends go through once's publisher, as the outbox relay would send them: the payment id
  // is the `message-id` attribute and the deduplication id, the account the message group.
  const publisher = createSqsPublisher({ client });
  const firsts = [
    ...payments.map((p) => ({
      id: p.id,
      destination: queueUrl,
      key: p.account,
      body: JSON.stringify({ account: p.account, cents: p.cents }),
    })),
    ...malformedIds.map((id) => ({
      id,
      destination: queueUrl,
      key: 'acct-0',
      body: '{"account": "acct-0", "cents": ',
    })),
  ];
  for (let i = 0; i < firsts.length; i += 100) {
    const failed = (await publisher.publish(firsts.slice(i, i + 100))).filter((r) => !r.ok);
    if (failed.length) throw new Error(`SQS refused ${failed.length} payments, e.g. ${failed[0]?.id}`);
  }
  const again = payments.filter(() => Math.random() < dupShare);
  for (let i = 0; i < again.length; i += 10) {
    const batch = again.slice(i, i + 10);
    const res = await client.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: batch.map((p, k) => ({
          Id: String(k),
          MessageBody: JSON.stringify({ account: p.account, cents: p.cents }),
          MessageGroupId: p.account,
          MessageDeduplicationId: randomUUID(),
          MessageAttributes: { 'message-id': { DataType: 'String', StringValue: p.id } },
        })),
      }),
    );
    if (res.Failed?.length) throw new Error(`SQS refused ${res.Failed.length} re-sends`);
  }
  return { sent: firsts.length + again.length, unique: firsts.length, payments, malformedIds };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [queueUrl, count = '100', dupShare = '0.25'] = process.argv.slice(2);
  if (!queueUrl) {
    console.error('usage: node src/producer.mjs <queue-url> [count] [dup-share]');
    process.exit(2);
  }
  const client = sqsClient();
  const r = await publishPayments({
    client,
    queueUrl,
    count: Number(count),
    dupShare: Number(dupShare),
    run: Date.now().toString(36),
  });
  console.log(`sent ${r.sent} messages: ${r.unique} unique payments, ${r.sent - r.unique} re-sent`);
  client.destroy();
}
