// Where a partition happens: network namespaces with nft drops (`namespace`, needs root), or dark
// gates in front of PostgreSQL and the fault proxies (`proxy`, the stand-in). Only `namespace`
// partitions count toward the campaign's goal; the record of every partition says which it was.
import { DarkGate } from './dark-gate.mjs';
import { onExit } from './exit-cleanup.mjs';
import { NetnsLab, namespaceSupport, removeStale } from './netns.mjs';

/** What a partition cuts, and which way. */
export const PARTITION_TARGETS = Object.freeze(['pg', 'broker', 'both']);

/**
 * @param {{ slots: string[], mode?: 'auto'|'namespace'|'proxy', log?: (s: string) => void }} o
 * @returns {Promise<NamespacePartitions | ProxyPartitions>}
 */
export async function openPartitions(o) {
  const log = o.log ?? (() => {});
  const mode = o.mode ?? 'auto';
  if (mode !== 'proxy') {
    removeStale(log);
    const support = namespaceSupport(log);
    if (support.ok) return new NamespacePartitions(NetnsLab.create(o.slots));
    if (mode === 'namespace')
      throw new Error(`namespace partitions are not possible here: ${support.reason}`);
    log(`partitions through dark gates (the proxy stand-in): ${support.reason}`);
    return new ProxyPartitions(support.reason);
  }
  return new ProxyPartitions('--partition-mode proxy');
}

class NamespacePartitions {
  via = 'namespace';
  why = undefined;
  #lab;
  #off;
  /** slot -> { pg: port, broker: port } */
  #ports = new Map();

  constructor(lab) {
    this.#lab = lab;
    this.#off = onExit(() => lab.destroy());
  }

  /** Addresses PostgreSQL listens on besides 127.0.0.1, and the subnet its pg_hba must trust. */
  get pgListen() {
    return { addresses: this.#lab.hostAddresses, trust: this.#lab.subnet };
  }

  /** Where the slot's fault proxy binds (its children can reach nothing else). */
  bindHost(slot) {
    return this.#lab.hostAddress(slot);
  }

  wrap(slot) {
    return this.#lab.wrap(slot);
  }

  /**
   * The slot's endpoints as its children see them: PostgreSQL and the fault proxy directly.
   * `advertised` (Kafka: the address the broker's metadata names): inside the slot it leads to
   * the slot's fault proxy too, so a client without a socket hook can bootstrap there.
   */
  async route(slot, { pgPort, brokerPort, advertised }) {
    this.#ports.set(slot, { pg: pgPort, broker: brokerPort });
    const host = this.#lab.hostAddress(slot);
    if (advertised) this.#lab.redirect(slot, advertised, brokerPort);
    return { pg: `${host}:${pgPort}`, broker: `${host}:${brokerPort}`, advertised };
  }

  /** Resolves once the drop rules are in force. */
  async cut(slot, target, direction) {
    const p = this.#ports.get(slot);
    const ports = target === 'pg' ? [p.pg] : target === 'broker' ? [p.broker] : [p.pg, p.broker];
    await this.#lab.partition(slot, ports, direction);
  }

  async heal(slot) {
    await this.#lab.heal(slot);
  }

  async close() {
    this.#off();
    this.#lab.destroy();
  }
}

class ProxyPartitions {
  via = 'proxy';
  /** slot -> { pg: DarkGate, broker: DarkGate } */
  #gates = new Map();

  constructor(why) {
    this.why = why;
  }

  get pgListen() {
    return { addresses: [], trust: undefined };
  }

  bindHost() {
    return '127.0.0.1';
  }

  wrap() {
    return [];
  }

  /**
   * Puts a dark gate in front of PostgreSQL and of the slot's fault proxy. No `advertised`
   * address: outside a namespace a client that follows the broker's metadata would bypass the
   * proxy, so only a client with a socket hook (kafkajs) can be cut here.
   */
  async route(slot, { pgPort, brokerPort }) {
    const gates = {
      pg: await DarkGate.start({ host: '127.0.0.1', port: pgPort }),
      broker: await DarkGate.start({ host: '127.0.0.1', port: brokerPort }),
    };
    this.#gates.set(slot, gates);
    return { pg: gates.pg.address, broker: gates.broker.address };
  }

  async cut(slot, target, direction) {
    const g = this.#gates.get(slot);
    if (target !== 'broker') g.pg.dark(direction);
    if (target !== 'pg') g.broker.dark(direction);
  }

  async heal(slot) {
    const g = this.#gates.get(slot);
    g.pg.light();
    g.broker.light();
  }

  async close() {
    for (const g of this.#gates.values()) {
      await g.pg.close();
      await g.broker.close();
    }
  }
}
