// @ts-check
// Messages of a topic a consumer group has not committed yet: the upstream backlog.

/**
 * @param {import('kafkajs').Admin} admin a connected admin client
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
    lag += Number(p.offset) - Math.max(0, Number(c?.offset ?? 0));
  }
  return lag;
}
