// The stand-in for a partition where namespaces cannot be made (not root): a TCP forwarder on
// loopback in front of PostgreSQL or a slot's fault proxy that can stop forwarding, one way or
// both, and start again with nothing lost. It is weaker than a dropped packet and the run says
// so: the gate's own kernel keeps ACKing what the client sends and answers its TCP keepalives, so
// a client's keepalive never fires; only a bound on the client's own statements or requests does.
import net from 'node:net';

/** One forwarded connection; `held` is what a dark direction kept back (a close, an error). */
class Pair {
  constructor(client, upstream) {
    this.client = client;
    this.upstream = upstream;
    this.held = [];
  }
}

/** `DarkGate.start(target)`; `dark(direction)`, `light()`, `close()`. */
export class DarkGate {
  #server;
  #target;
  #pairs = new Set();
  /** null (forwarding), 'both', 'to-target' (client → target held) or 'to-client' (target → client held), as FaultProxy's dark paths. */
  #dark = null;
  port = 0;

  constructor(server, target) {
    this.#server = server;
    this.#target = target;
    server.on('connection', (c) => this.#accept(c));
  }

  /** Listens on an ephemeral 127.0.0.1 port and forwards to `target` (`{ host, port }`). */
  static async start(target) {
    const server = net.createServer({ pauseOnConnect: true });
    const gate = new DarkGate(server, target);
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    gate.port = server.address().port;
    return gate;
  }

  get address() {
    return `127.0.0.1:${this.port}`;
  }

  #holds(side) {
    const d = this.#dark;
    if (d === null) return false;
    if (d === 'both') return true;
    return side === 'client' ? d === 'to-target' : d === 'to-client';
  }

  /** Stops forwarding in `direction`: what arrives stays in the gate's socket buffers. */
  dark(direction) {
    this.#dark = direction;
    for (const p of this.#pairs) this.#apply(p);
  }

  /** Forwards again: held bytes flow first, then any close or reset that was held back. */
  light() {
    this.#dark = null;
    for (const p of this.#pairs) this.#apply(p);
  }

  #apply(p) {
    for (const [side, sock] of [
      ['client', p.client],
      ['upstream', p.upstream],
    ]) {
      if (sock.destroyed) continue;
      if (this.#holds(side)) sock.pause();
      else sock.resume();
    }
    if (this.#dark === null) for (const f of p.held.splice(0)) f();
  }

  #accept(client) {
    const upstream = net.connect(this.#target);
    const p = new Pair(client, upstream);
    this.#pairs.add(p);
    // A reset on one side reaches the other only when that direction forwards.
    const reset = (from) => () => {
      const to = from === 'client' ? upstream : client;
      const go = () => (to.destroyed ? undefined : to.resetAndDestroy());
      if (this.#holds(from)) p.held.push(go);
      else go();
    };
    client.on('error', reset('client'));
    upstream.on('error', reset('upstream'));
    client.on('close', () => {
      if (client.destroyed && upstream.destroyed) this.#pairs.delete(p);
    });
    upstream.on('close', () => {
      if (client.destroyed && upstream.destroyed) this.#pairs.delete(p);
    });
    this.#forward('client', client, upstream);
    this.#forward('upstream', upstream, client);
    upstream.once('connect', () => this.#apply(p));
    this.#apply(p);
  }

  /**
   * Bytes from `from` to `to`. A paused socket reads nothing more, so a dark direction holds its
   * bytes in the kernel and, behind them, the FIN ('end' comes only after every byte was read).
   * No pipe(): its drain handler would resume a source this gate paused.
   */
  #forward(side, from, to) {
    from.on('data', (chunk) => {
      if (to.destroyed) return;
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => {
          if (!this.#holds(side) && !from.destroyed) from.resume();
        });
      }
    });
    from.on('end', () => {
      if (!to.destroyed) to.end();
    });
  }

  /** Stops listening and resets what is open. */
  async close() {
    for (const p of this.#pairs) {
      for (const s of [p.client, p.upstream]) if (!s.destroyed) s.destroy();
    }
    this.#pairs.clear();
    await new Promise((r) => this.#server.close(() => r()));
  }
}
