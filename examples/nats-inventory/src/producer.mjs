// @ts-check
// Publishes reservations through once's NATS publisher (`Nats-Msg-Id` = the reservation id, PubAck
// awaited), waits past the stream's duplicate window, and re-sends a share of them with the same
// id: the duplicates a producer retry or a relay restart makes once JetStream has forgotten the id.
import { createNatsPublisher } from '@once/nats';

/** @typedef {{ id: string } & import('./inventory.mjs').Reservation} SentReservation */

/**
 * @param {object} o
 * @param {string} o.servers
 * @param {string} o.subjectPrefix reservations go to `<prefix>.<item>`
 * @param {number} o.count unique reservations
 * @param {number} o.dupShare share of them sent a second time with the same id
 * @param {string} o.run makes the ids unique to this run
 * @param {number} o.duplicateWindowMs the stream's `duplicate_window`: re-sends wait past it
 * @param {number} [o.items]
 * @returns {Promise<{ sent: number, unique: number, reservations: SentReservation[] }>}
 */
export async function publishReservations({
  servers,
  subjectPrefix,
  count,
  dupShare,
  run,
  duplicateWindowMs,
  items = 20,
}) {
  /** @type {SentReservation[]} */
  const reservations = Array.from({ length: count }, (_, i) => ({
    id: `res-${run}-${i}`,
    item: `sku-${i % items}`,
    qty: 1 + Math.floor(Math.random() * 9),
  }));
  const publisher = createNatsPublisher({ servers });
  /** @param {SentReservation[]} list */
  const publish = async (list) => {
    for (let i = 0; i < list.length; i += 200) {
      const results = await publisher.publish(
        list.slice(i, i + 200).map((r) => ({
          id: r.id,
          destination: `${subjectPrefix}.${r.item}`,
          key: undefined,
          body: Buffer.from(JSON.stringify({ item: r.item, qty: r.qty })),
          headers: {},
        })),
      );
      const failed = results.filter((r) => !r.ok);
      if (failed.length)
        throw new Error(`JetStream refused ${failed.length} reservations, e.g. ${failed[0]?.id}`);
    }
  };
  try {
    await publish(reservations);
    const again = reservations.filter(() => Math.random() < dupShare);
    // Inside the window JetStream would drop these at publish; past it they are stored again.
    await new Promise((r) => setTimeout(r, duplicateWindowMs + 500));
    await publish(again);
    return { sent: reservations.length + again.length, unique: reservations.length, reservations };
  } finally {
    await publisher.stop();
  }
}
