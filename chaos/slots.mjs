// The consumer slots of a run and what each one's children connect to. A slot is one named
// consumer (once-1, once-2, the joiner once-3, the naive control): its children run in the slot's
// network namespace (when partitions use namespaces) and reach PostgreSQL and the broker only
// through the slot's own endpoints: the run's PostgreSQL on the slot's veth address, and a fault
// proxy bound there (Kafka advertises 127.0.0.1, which inside a namespace is the namespace's own
// loopback: every kafkajs socket goes to the proxy through the client's socketFactory; the other
// Kafka clients have no such hook, so with `advertised` the slot's namespace itself sends
// 127.0.0.1:<broker port> to the proxy, see NetnsLab.redirect).
import { BROKER_URLS } from './brokers.mjs';

export const SLOTS = Object.freeze(['once-1', 'once-2', 'once-3', 'naive']);

/**
 * @param {{ partitions: object, FaultProxy: object, target: string, pgPort: number, advertised?: string }} o
 * @returns {Promise<{ endpoints: Map<string, object>, cutAll(): number, close(): Promise<void> }>}
 */
export async function wireSlots(o) {
  const proxies = [];
  const endpoints = new Map();
  try {
    for (const slot of SLOTS) {
      const proxy = await o.FaultProxy.start(o.target, { host: o.partitions.bindHost(slot) });
      proxies.push(proxy);
      const ep = await o.partitions.route(slot, {
        pgPort: o.pgPort,
        brokerPort: proxy.port,
        ...(o.advertised ? { advertised: o.advertised } : {}),
      });
      const amqp = new URL(BROKER_URLS.rabbitmq);
      amqp.host = ep.broker;
      // A 5 s heartbeat, so a stopped consumer's connection is closed by the server within seconds.
      amqp.searchParams.set('heartbeat', '5');
      endpoints.set(slot, {
        databaseUrl: `postgres://postgres@${ep.pg}/postgres`,
        kafkaProxy: ep.broker,
        // Where a Kafka client without a socket hook bootstraps (namespaces only; see route()).
        ...(ep.advertised ? { kafkaAdvertised: ep.advertised } : {}),
        sqsEndpoint: `http://${ep.broker}`,
        amqpUrl: amqp.toString(),
        natsUrl: `nats://${ep.broker}`,
      });
    }
  } catch (err) {
    for (const p of proxies) await p.close();
    throw err;
  }
  return {
    endpoints,
    /** Resets every open consumer connection to the broker; returns how many there were. */
    cutAll() {
      let n = 0;
      for (const p of proxies) {
        n += p.openCount;
        p.cutAll();
      }
      return n;
    },
    async close() {
      for (const p of proxies) await p.close();
    },
  };
}
