// @ts-check
// The Kafka side of a run: the events topic, and the receipts group's lag on it.

/**
 * Creates the events topic and the receipts service's dead-letter topic (`<topic>.dlq`).
 * @param {import('kafkajs').Admin} admin a connected admin client
 * @param {string} topic
 */
export async function createTopics(admin, topic) {
  await admin.createTopics({
    topics: [
      { topic, numPartitions: 3 },
      { topic: `${topic}.dlq`, numPartitions: 1 },
    ],
    waitForLeaders: true,
  });
}

/**
 * Events the receipts group has not committed yet. once commits an offset only after the
 * transaction of everything before it committed.
 * @param {import('kafkajs').Admin} admin
 * @param {string} topic
 * @param {string} groupId
 * @returns {Promise<number>}
 */
export async function kafkaLag(admin, topic, groupId) {
  const ends = await admin.fetchTopicOffsets(topic);
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
  let lag = 0;
  for (const p of ends) {
    const c = committed?.partitions.find((x) => x.partition === p.partition);
    // -1: nothing committed yet, so the whole partition is behind.
    lag += Number(p.offset) - Math.max(Number(p.low), Number(c?.offset ?? -1));
  }
  return lag;
}
