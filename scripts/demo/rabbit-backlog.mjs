// @ts-check
// Messages a set of RabbitMQ queues still holds: ready ones (AMQP's queue.declare-ok counts them)
// plus unacknowledged ones, which AMQP cannot report; those come from rabbitmqctl, asked only
// once nothing is ready, since it takes about half a second. Without rabbitmqctl (a broker in a
// container) the unacknowledged count is taken as 0.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * @param {import('amqplib').ChannelModel} connection
 * @param {readonly string[]} queues a queue not declared (yet) counts as empty
 * @returns {Promise<number>}
 */
export async function rabbitBacklog(connection, queues) {
  let ready = 0;
  for (const q of queues) {
    // A missing queue closes the channel it was checked on (404), so each check has its own.
    const ch = await connection.createChannel();
    ch.on('error', () => {});
    try {
      ready += (await ch.checkQueue(q)).messageCount;
      await ch.close();
    } catch {}
  }
  if (ready > 0) return ready;
  return unacknowledged(queues);
}

/** @param {readonly string[]} queues */
async function unacknowledged(queues) {
  let out;
  try {
    out = (await run('rabbitmqctl', ['-q', 'list_queues', 'name', 'messages_unacknowledged'])).stdout;
  } catch {
    return 0;
  }
  let n = 0;
  for (const line of out.split('\n')) {
    const [name, count] = line.trim().split(/\s+/);
    if (name !== undefined && queues.includes(name)) n += Number(count) || 0;
  }
  return n;
}
