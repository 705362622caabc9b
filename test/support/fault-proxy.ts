import net from 'node:net';

/** Where a {@link FaultProxy} forwards to. */
export interface FaultProxyTarget {
  readonly host: string;
  readonly port: number;
}

/** Which way a dark proxy stops forwarding: toward the target, toward the client, or both. */
export type DarkDirection = 'both' | 'to-target' | 'to-client';

/** One proxied connection: the client's socket and ours to the target. */
interface Pair {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
}

/**
 * A TCP proxy on 127.0.0.1 that a test puts between a client and PostgreSQL or a broker, to
 * cut, refuse or slow connections at a moment of its choosing without touching the server.
 *
 * Kafka caveat: brokers advertise their own address in metadata, so a kafkajs client only uses
 * the proxy for bootstrap; to fault Kafka traffic, proxy the advertised port or cut at the client.
 *
 * @example
 * const proxy = await FaultProxy.start({ host: '127.0.0.1', port: 5432 });
 * const pool = new pg.Pool({ connectionString: proxy.url(serviceUrls().databaseUrl) });
 * proxy.cutAll(); // every open connection gets a RST
 * await proxy.close();
 */
export class FaultProxy {
  readonly #server: net.Server;
  readonly #target: FaultProxyTarget;
  readonly #host: string;
  readonly #pairs = new Set<Pair>();
  readonly #timers = new Set<NodeJS.Timeout>();
  #refusing = false;
  #darkToTarget = false;
  #darkToClient = false;
  #latencyMs = 0;
  #accepted = 0;
  #port = 0;

  private constructor(server: net.Server, target: FaultProxyTarget, host: string) {
    this.#server = server;
    this.#target = target;
    this.#host = host;
    server.on('connection', (client) => this.#accept(client));
  }

  /**
   * Listens on an ephemeral port; `target` may be `{host, port}` or `'host:port'`. `host` is the
   * address to listen on: loopback by default, or one end of a veth whose other end is in a
   * network namespace (the fault campaign's partitions).
   */
  static async start(
    target: FaultProxyTarget | string,
    { host = '127.0.0.1' }: { host?: string } = {},
  ): Promise<FaultProxy> {
    const server = net.createServer();
    const proxy = new FaultProxy(server, typeof target === 'string' ? parseHostPort(target) : target, host);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, () => resolve());
    });
    proxy.#port = (server.address() as net.AddressInfo).port;
    return proxy;
  }

  /** The ephemeral port the proxy listens on. */
  get port(): number {
    return this.#port;
  }

  /** `<host>:<port>` (`127.0.0.1:<port>` by default), e.g. for kafkajs `brokers`. */
  get address(): string {
    return `${this.#host}:${this.port}`;
  }

  /** Connections accepted so far (refused ones included), to assert that a client reconnected. */
  get acceptedCount(): number {
    return this.#accepted;
  }

  /** Connections currently open through the proxy. */
  get openCount(): number {
    return this.#pairs.size;
  }

  /**
   * `original` with its host and port replaced by the proxy's: a url (`postgres://u@h:5432/db`,
   * `amqp://...`, `http://...`) keeps its scheme, credentials, path and query; a bare `host:port` works too.
   */
  url(original: string): string {
    if (!original.includes('://')) return this.address;
    const u = new URL(original);
    u.hostname = this.#host;
    u.port = String(this.port);
    return u.toString();
  }

  /** Resets every open connection (the client sees ECONNRESET); new connections are still accepted. */
  cutAll(): void {
    for (const pair of this.#pairs) this.#drop(pair);
  }

  /** While on, each new connection is reset as soon as it is accepted; open ones are untouched. */
  refuse(on: boolean): void {
    this.#refusing = on;
  }

  /**
   * Stops forwarding bytes in `direction` on every connection, open and new, without closing
   * anything: no RST, no FIN. The proxy stops reading, so the sender's writes still succeed (the
   * kernel acknowledges them) and the reader hears silence, as across a network path that went
   * dark; unlike a real partition, TCP keepalive probes are still answered (by the proxy's
   * kernel). New connections are accepted and go dark too. {@link FaultProxy.light} resumes,
   * delivering what waited, in order.
   */
  dark(direction: DarkDirection = 'both'): void {
    if (direction !== 'to-client') this.#darkToTarget = true;
    if (direction !== 'to-target') this.#darkToClient = true;
    for (const pair of this.#pairs) this.#applyDark(pair);
  }

  /** Forwards again in both directions, what was held back first. */
  light(): void {
    this.#darkToTarget = false;
    this.#darkToClient = false;
    for (const pair of this.#pairs) this.#applyDark(pair);
  }

  #applyDark(pair: Pair): void {
    // Reading the client's socket feeds the target; reading the target's feeds the client.
    if (this.#darkToTarget) pair.client.pause();
    else pair.client.resume();
    if (this.#darkToClient) pair.upstream.pause();
    else pair.upstream.resume();
  }

  /** Delays every chunk in both directions by `n` ms from now on, keeping byte order. 0 turns it off. */
  latencyMs(n: number): void {
    if (!(n >= 0)) throw new RangeError(`latencyMs must be >= 0, got ${n}`);
    this.#latencyMs = n;
  }

  /** Stops listening and resets every open connection and pending delayed write. */
  async close(): Promise<void> {
    this.cutAll();
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    this.#accepted++;
    if (this.#refusing) {
      client.on('error', () => {});
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(this.#target);
    const pair: Pair = { client, upstream };
    this.#pairs.add(pair);
    // An error on either side resets both: the peer sees the connection drop, as it would if the
    // network failed.
    client.on('error', () => this.#drop(pair));
    upstream.on('error', () => this.#drop(pair));
    // A clean close (FIN both ways) needs no reset; forget the pair once both sides are gone.
    const closed = () => {
      if (client.destroyed && upstream.destroyed) this.#pairs.delete(pair);
    };
    client.on('close', closed);
    upstream.on('close', closed);
    this.#pipe(client, upstream);
    this.#pipe(upstream, client);
    this.#applyDark(pair);
  }

  #pipe(from: net.Socket, to: net.Socket): void {
    // Chunks and the final FIN go out in arrival order: when latency drops, a later chunk must
    // not overtake an earlier one still waiting. One FIFO per direction, drained by one timer: a
    // timer per chunk would not do, since a late-firing timer (a loaded machine) let a chunk that
    // arrived after it go first.
    const queue: { due: number; send: () => void }[] = [];
    let timer: NodeJS.Timeout | undefined;
    const drain = () => {
      if (timer) this.#timers.delete(timer);
      timer = undefined;
      const now = Date.now();
      while (queue.length > 0 && queue[0]!.due <= now) queue.shift()!.send();
      schedule();
    };
    const schedule = () => {
      if (timer || queue.length === 0) return;
      timer = setTimeout(drain, Math.max(0, queue[0]!.due - Date.now()));
      this.#timers.add(timer);
    };
    const deliver = (send: () => void) => {
      const due = Date.now() + this.#latencyMs;
      if (queue.length === 0 && this.#latencyMs === 0) return send();
      queue.push({ due, send });
      schedule();
    };
    from.on('data', (chunk) => deliver(() => to.destroyed || to.write(chunk)));
    from.on('end', () => deliver(() => to.destroyed || to.end()));
  }

  #drop(pair: Pair): void {
    if (!this.#pairs.delete(pair)) return;
    for (const s of [pair.client, pair.upstream]) {
      // A socket still connecting cannot send a RST; destroy() is all there is.
      if (s.destroyed) continue;
      if (s.readyState === 'opening') s.destroy();
      else s.resetAndDestroy();
    }
  }
}

function parseHostPort(s: string): FaultProxyTarget {
  const at = s.lastIndexOf(':');
  const port = Number(s.slice(at + 1));
  if (at < 1 || !Number.isInteger(port)) throw new TypeError(`expected host:port, got '${s}'`);
  return { host: s.slice(0, at), port };
}
