import {
  Admin,
  type BaseOptions,
  Consumer,
  type ConsumerOptions,
  type FetchOptions,
  type GroupAssignment,
  type MessagesStream,
  murmur2,
  offsetCommitV8,
  offsetCommitV9,
  Producer,
  type ProducerOptions,
} from '@platformatic/kafka';
import {
  type FetchedPart,
  type FetchPart,
  isPartitionRevoked,
  PartitionFetcher,
  PartitionRevokedError,
} from './partition-fetcher.js';
import {
  type ClientAdmin,
  type ClientHeaders,
  type ClientMessage,
  type ClientProducer,
  type GroupConsumer,
  type GroupConsumerConfig,
  type GroupJoin,
  KAFKA_CLIENT,
  type KafkaClient,
  type OutgoingMessage,
  type PartitionBatch,
} from './types.js';

/**
 * `@platformatic/kafka`'s connection options, shared by every consumer, producer and admin client
 * the once client makes (`clientId`, `bootstrapBrokers`, `timeout`, `retries`, `sasl`, `tls`, ...).
 */
export type PlatformaticOptions = BaseOptions;

/** Settings merged under once's own into each client the once client makes. */
export interface PlatformaticDefaults {
  /**
   * Consumer options (e.g. `groupProtocol: 'consumer'` for KIP-848, `maxWaitTime`, `maxBytes`,
   * `maxBytesPerPartition`, `isolationLevel`), under once's own (group id, timeouts, no
   * autocommit) and under a consumer's `consumerConfig`.
   */
  consumer?: Readonly<Record<string, unknown>>;
  /** Producer options, under a publisher's `producerConfig` and once's own (idempotent, acks all, one in flight). */
  producer?: Readonly<Record<string, unknown>>;
  /**
   * KIP-848 groups only (`groupProtocol: 'consumer'`): before joining, set the group's
   * `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` to the consumer's
   * `sessionTimeoutMs` and `heartbeatIntervalMs` (an IncrementalAlterConfigs on the group, which
   * needs ALTER_CONFIGS on it). Under KIP-848 the broker owns both (45 s and 5 s by default, within
   * its `group.consumer.min/max.*` bounds), so without this once's own values are not used.
   * @default false
   */
  groupTimeouts?: boolean;
}

/**
 * Error ids `@platformatic/kafka` raises when this member's generation is over, under the classic
 * protocol (generation, member id, rebalance) and KIP-848 (member epoch).
 */
const OWNERSHIP_LOST = [
  'REBALANCE_IN_PROGRESS',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'FENCED_INSTANCE_ID',
  'NOT_COORDINATOR',
  'FENCED_MEMBER_EPOCH',
  'STALE_MEMBER_EPOCH',
  'UNRELEASED_INSTANCE_ID',
];

/** Walks an error and its nested errors (`errors`, `cause`), depth-first. */
function* errorsIn(err: unknown, depth = 0): Generator<Record<string, unknown>> {
  if (typeof err !== 'object' || err === null || depth > 8) return;
  const e = err as Record<string, unknown>;
  yield e;
  if (Array.isArray(e.errors)) for (const inner of e.errors) yield* errorsIn(inner, depth + 1);
  if (e.cause !== undefined) yield* errorsIn(e.cause, depth + 1);
}

/** The first `apiId` (the Kafka error name) of a `@platformatic/kafka` error that is in `ids`. */
function apiIdIn(err: unknown, ids: readonly string[]): string | undefined {
  for (const e of errorsIn(err)) if (typeof e.apiId === 'string' && ids.includes(e.apiId)) return e.apiId;
  return undefined;
}

/** True for a `@platformatic/kafka` error (or once's revocation) that means "this member's generation is over". */
export function isPlatformaticOwnershipLost(err: unknown): boolean {
  if (isPartitionRevoked(err)) return true;
  return apiIdIn(err, OWNERSHIP_LOST) !== undefined;
}

const POSITIVE = 0x7fffffff;

/**
 * The producers' default partitioner: a key goes to `toPositive(murmur2(key)) % partitions`, the
 * partition kafkajs' DefaultPartitioner and Java's choose (`@platformatic/kafka`'s own default
 * takes `murmur2 >>> 0`, which differs for half of the keys); no key: round robin per topic.
 */
export function compatiblePartitioner(): (
  message: { topic: string },
  key: Buffer | undefined,
  context: { metadata: { topics: Map<string, { partitionsCount: number }> } | undefined },
) => number {
  const next = new Map<string, number>();
  return (message, key, context) => {
    if (Buffer.isBuffer(key)) return murmur2(key) & POSITIVE;
    const n = next.get(message.topic) ?? 0;
    next.set(message.topic, (n + 1) & POSITIVE);
    const count = context.metadata?.topics.get(message.topic)?.partitionsCount;
    return count ? n % count : n;
  };
}

/**
 * Wraps `@platformatic/kafka` as a {@link KafkaClient}: `options` are the connection options of
 * every client it makes, `defaults` settings merged under once's own.
 */
export function platformaticClient(
  options: PlatformaticOptions,
  defaults: PlatformaticDefaults = {},
): KafkaClient {
  return {
    [KAFKA_CLIENT]: true,
    name: 'platformatic',
    // Its commit always sends `committedMetadata: null`: the replay marker cannot ride on it.
    capabilities: { commitMetadata: false },
    consumer: (config) =>
      new PlatformaticGroupConsumer(
        options,
        defaults.consumer ?? {},
        config,
        defaults.groupTimeouts === true,
      ),
    producer: (settings) => platformaticProducer(options, { ...defaults.producer, ...settings }),
    admin: () => platformaticAdmin(options),
    isOwnershipLost: isPlatformaticOwnershipLost,
  };
}

/** What {@link superviseGroup} needs: where the library reports a group error, and once's side. */
export interface GroupSupervisorDeps {
  /** The library's consumer: it emits `error` when a rejoin after a failed heartbeat failed too. */
  emitter: { on(event: 'error', listener: (error: unknown) => void): unknown };
  /** KIP-848: the library's heartbeat goes on by itself after an error; nothing to rejoin. */
  kip848: boolean;
  /** Drops the member's whole assignment at once (its membership is over). */
  revokeAll(): void;
  /** Joins the group again (the classic protocol's `joinGroup`); resolves once joined. */
  rejoin(): Promise<void>;
  /** Tells once's crash listeners; `restart`: the client rejoins by itself. */
  report(error: unknown, restart: boolean): void;
  /** True once the consumer is closing: no rejoin then. */
  closing(): boolean;
  /** Wait before rejoin attempt `attempt` (1 for the first), ms. */
  delayMs(attempt: number): number;
}

/**
 * Listens for the library's consumer `error` (unheard, it would crash the process) and recovers.
 * Under the classic protocol the library emits it when the rejoin after a failed heartbeat failed
 * (e.g. `joinGroup failed N times`, SyncGroup's REBALANCE_IN_PROGRESS each time) and then gives
 * up: no heartbeat follows, the coordinator drops the member, and its old assignment is stale.
 * Each error is reported (restart: true); the assignment is revoked at once and the group joined
 * again, after `delayMs`, until a join succeeds or the consumer closes (each failure reported).
 */
export function superviseGroup(deps: GroupSupervisorDeps): void {
  let rejoining = false;
  const rejoin = async () => {
    rejoining = true;
    try {
      for (let attempt = 1; !deps.closing(); attempt++) {
        await new Promise((r) => setTimeout(r, deps.delayMs(attempt)).unref?.());
        if (deps.closing()) return;
        try {
          await deps.rejoin();
          return;
        } catch (error) {
          if (!deps.closing()) deps.report(error, true);
        }
      }
    } finally {
      rejoining = false;
    }
  };
  deps.emitter.on('error', (error) => {
    if (deps.closing()) return;
    deps.report(error, true);
    if (deps.kip848 || rejoining) return;
    deps.revokeAll();
    void rejoin();
  });
}

/** The `@platformatic/kafka` Consumer fields this module reads (typed once). */
type PltConsumer = Consumer<Buffer, Buffer, Buffer, Buffer>;

/** One topic of a fetch request. */
type FetchRequestTopic = FetchOptions<Buffer, Buffer, Buffer, Buffer>['topics'][number];

/** Headers of a fetched record as once reads them: text keys, bytes, repeated keys as arrays. */
function headersOf(pairs: readonly [Buffer | null, Buffer | null][]): ClientHeaders {
  const out: ClientHeaders = {};
  for (const [k, v] of pairs) {
    if (k === null) continue;
    const name = k.toString('utf8');
    const value = v ?? Buffer.alloc(0);
    const prev = out[name];
    if (prev === undefined) out[name] = value;
    else if (Array.isArray(prev)) prev.push(value);
    else out[name] = [prev, value];
  }
  return out;
}

/** Control batches (transaction markers) carry no data. */
const IS_CONTROL = 1 << 5;
/** Kafka's OFFSET_OUT_OF_RANGE error code. */
const OFFSET_OUT_OF_RANGE = 1;

/**
 * A once group consumer on `@platformatic/kafka`: group membership (join, heartbeats, leave, both
 * protocols) from the library's `consume()`, whose stream is kept paused; batches from
 * {@link PartitionFetcher}'s per-partition fetch loops; the assignment read from the library's
 * `assignments` property at the moment the library writes it (before a KIP-848 member acknowledges
 * a revocation to the coordinator).
 */
class PlatformaticGroupConsumer implements GroupConsumer {
  readonly #consumer: PltConsumer;
  readonly #fetcher: PartitionFetcher;
  readonly #joinListeners: ((e: GroupJoin) => void)[] = [];
  readonly #crashListeners: ((e: { error: unknown; restart: boolean }) => void)[] = [];
  readonly #maxWaitTime: number;
  readonly #maxBytes: number;
  readonly #partitionMaxBytes: number;
  readonly #isolationLevel: number | undefined;
  #topics: readonly string[] = [];
  #fromBeginning = false;
  #stream: MessagesStream<Buffer, Buffer, Buffer, Buffer> | undefined;
  #closing = false;
  readonly #options: PlatformaticOptions;
  readonly #config: GroupConsumerConfig;
  readonly #kip848: boolean;
  readonly #groupTimeouts: boolean;
  /** Classic: the generation of the current assignment (-1: none). */
  #generation = -1;

  constructor(
    options: PlatformaticOptions,
    defaults: Readonly<Record<string, unknown>>,
    config: GroupConsumerConfig,
    groupTimeouts: boolean,
  ) {
    const merged = {
      ...options,
      ...defaults,
      ...config.extra,
      groupId: config.groupId,
      sessionTimeout: config.sessionTimeoutMs,
      heartbeatInterval: config.heartbeatIntervalMs,
      rebalanceTimeout: config.rebalanceTimeoutMs,
      autocommit: false,
    } as ConsumerOptions<Buffer, Buffer, Buffer, Buffer>;
    this.#consumer = new Consumer(merged);
    this.#options = options;
    this.#config = config;
    this.#kip848 = (merged as { groupProtocol?: unknown }).groupProtocol === 'consumer';
    this.#groupTimeouts = groupTimeouts;
    const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);
    // A fetch long-polls this long when its partitions have nothing; a partition that becomes
    // ready meanwhile waits for it (one fetch per broker at a time).
    this.#maxWaitTime = num(merged.maxWaitTime, 100);
    this.#maxBytes = num(merged.maxBytes, 10 * 1024 * 1024);
    this.#partitionMaxBytes = num(merged.maxBytesPerPartition, 1024 * 1024);
    this.#isolationLevel = typeof merged.isolationLevel === 'number' ? merged.isolationLevel : undefined;
    this.#fetcher = new PartitionFetcher({
      nodeOf: (topic, partition) => this.#nodeOf(topic, partition),
      fetch: (node, parts) => this.#fetch(node, parts),
      position: (topic, partition) => this.#position(topic, partition),
      committed: (topic, partition) => this.#committed(topic, partition),
      reset: (topic, partition) => this.#reset(topic, partition),
      commit: (topic, partition, next, owned) => this.#commit(topic, partition, next, owned),
      // Fetch and lookup faults are retried by the loop; the adapter hears of them no other way.
      onError: () => {},
      isOwnershipLost: isPlatformaticOwnershipLost,
      retryDelayMs: 250,
      // Past the long poll and two of the library's request timeouts (30 s each by default).
      fetchTimeoutMs: this.#maxWaitTime + 60_000,
    });
    this.#watchAssignments();
    superviseGroup({
      emitter: this.#consumer,
      kip848: this.#kip848,
      revokeAll: () => {
        this.#generation = -1;
        this.#fetcher.setAssignment({});
      },
      rejoin: async () => {
        await this.#consumer.joinGroup({});
      },
      report: (error, restart) => {
        for (const l of this.#crashListeners) l({ error, restart });
      },
      closing: () => this.#closing,
      delayMs: (attempt) => Math.min(10_000, 500 * 2 ** (attempt - 1)),
    });
  }

  /**
   * Reads every write of the library's `assignments` property as it happens: the library sets it
   * after a classic SyncGroup and before a KIP-848 member acknowledges a revocation in its next
   * heartbeat, so a revocation is known here before another member can be given the partition.
   */
  #watchAssignments(): void {
    const consumer = this.#consumer;
    let current: GroupAssignment[] | null = consumer.assignments;
    Object.defineProperty(consumer, 'assignments', {
      configurable: true,
      enumerable: true,
      get: () => current,
      set: (value: GroupAssignment[] | null) => {
        current = value;
        this.#onAssignments(value);
      },
    });
  }

  #onAssignments(value: GroupAssignment[] | null): void {
    const assignment: Record<string, number[]> = {};
    for (const a of value ?? []) {
      if (typeof a.topic !== 'string' || !this.#topics.includes(a.topic)) continue;
      assignment[a.topic] = [...new Set([...(assignment[a.topic] ?? []), ...a.partitions])].sort(
        (x, y) => x - y,
      );
    }
    // Classic: the generation this assignment belongs to. The library takes a new generation id
    // from the JoinGroup response, before SyncGroup says which partitions stay; a commit in between
    // must carry the old one (and be refused), since the eager protocol revoked everything at the join.
    this.#generation = value === null ? -1 : this.#consumer.generationId;
    this.#fetcher.setAssignment(assignment);
    if (value === null) return;
    const memberId = this.#consumer.memberId ?? '';
    for (const listener of this.#joinListeners)
      listener({ memberId, assignment: this.#fetcher.assignment as Record<string, number[]> });
  }

  async connect(): Promise<void> {
    await this.#consumer.connectToBrokers(null);
  }

  async subscribe(topics: readonly string[], fromBeginning: boolean): Promise<void> {
    this.#topics = [...topics];
    this.#fromBeginning = fromBeginning;
    await this.#consumer.metadata({ topics: [...topics] });
  }

  async run(options: {
    concurrency: number;
    eachBatch: (batch: PartitionBatch) => Promise<void>;
  }): Promise<void> {
    if (this.#kip848 && this.#groupTimeouts) await this.#setGroupTimeouts();
    this.#fetcher.start(options.concurrency, options.eachBatch);
    await this.#join();
  }

  /** KIP-848: the group's session and heartbeat, which the broker owns, set to once's values. */
  async #setGroupTimeouts(): Promise<void> {
    const admin = new Admin(this.#options);
    try {
      await admin.incrementalAlterConfigs({
        resources: [
          {
            resourceType: 32, // GROUP
            resourceName: this.#config.groupId,
            configs: [
              {
                name: 'consumer.session.timeout.ms',
                configOperation: 0,
                value: String(this.#config.sessionTimeoutMs),
              },
              {
                name: 'consumer.heartbeat.interval.ms',
                configOperation: 0,
                value: String(this.#config.heartbeatIntervalMs),
              },
            ],
          },
        ],
      });
    } finally {
      await admin.close();
    }
  }

  /**
   * Joins the group through `consume()` (the library's only way to a KIP-848 membership); the
   * stream it returns never flows, so only the fetch loops read messages.
   */
  async #join(): Promise<void> {
    const stream = await this.#consumer.consume({
      topics: [...this.#topics],
      autocommit: false,
      mode: 'committed',
      fallbackMode: this.#fromBeginning ? 'earliest' : 'latest',
    });
    stream.pause();
    // The library resumes its streams after a KIP-848 revocation; this one must stay still.
    Object.defineProperty(stream, 'resume', { configurable: true, value: () => stream });
    this.#stream = stream;
    stream.on('error', (error: unknown) => {
      for (const l of this.#crashListeners) l({ error, restart: !this.#closing });
    });
    stream.once('close', () => {
      if (this.#stream === stream) this.#stream = undefined;
      if (this.#closing) return;
      // Closed under us (an error): the subscription went with it. Join again.
      setTimeout(() => {
        if (this.#closing) return;
        this.#join().catch((error: unknown) => {
          for (const l of this.#crashListeners) l({ error, restart: false });
        });
      }, 500).unref?.();
    });
    // Classic: the join completed inside consume(); the assignment is already set (and seen).
    // KIP-848: the assignment comes with a later heartbeat.
  }

  onGroupJoin(listener: (e: GroupJoin) => void): void {
    this.#joinListeners.push(listener);
  }

  onCrash(listener: (e: { error: unknown; restart: boolean }) => void): void {
    this.#crashListeners.push(listener);
  }

  pause(topic: string, partitions?: readonly number[]): void {
    this.#fetcher.pause(topic, partitions);
  }

  resume(topic: string, partitions?: readonly number[]): void {
    this.#fetcher.resume(topic, partitions);
  }

  seek(topic: string, partition: number, offset: string): void {
    this.#fetcher.seek(topic, partition, offset);
  }

  async stop(): Promise<void> {
    await this.#fetcher.stop();
  }

  async disconnect(): Promise<void> {
    this.#closing = true;
    await this.#fetcher.stop();
    const stream = this.#stream;
    // Give the stream its own resume back so that closing it can flow to its end.
    if (stream) Reflect.deleteProperty(stream, 'resume');
    await this.#consumer.close(true);
  }

  async #metadata() {
    return this.#consumer.metadata({ topics: [...this.#topics] });
  }

  async #nodeOf(topic: string, partition: number): Promise<number> {
    const md = await this.#metadata();
    const leader = md.topics.get(topic)?.partitions[partition]?.leader;
    if (leader === undefined || leader < 0) throw new Error(`no leader for ${topic}/${partition}`);
    return leader;
  }

  async #fetch(node: number, parts: readonly FetchPart[]): Promise<FetchedPart[]> {
    const md = await this.#metadata();
    const byId = new Map<string, string>();
    const topics = new Map<string, FetchRequestTopic>();
    for (const p of parts) {
      const t = md.topics.get(p.topic);
      if (!t) throw new Error(`no metadata for topic ${p.topic}`);
      byId.set(t.id, p.topic);
      const req: FetchRequestTopic = topics.get(t.id) ?? { topicId: t.id, partitions: [] };
      topics.set(t.id, req);
      req.partitions.push({
        partition: p.partition,
        currentLeaderEpoch: -1,
        fetchOffset: p.offset,
        lastFetchedEpoch: -1,
        partitionMaxBytes: this.#partitionMaxBytes,
      });
    }
    let response: Awaited<ReturnType<PltConsumer['fetch']>>;
    try {
      response = await this.#consumer.fetch({
        node,
        maxWaitTime: this.#maxWaitTime,
        maxBytes: this.#maxBytes,
        minBytes: 1,
        ...(this.#isolationLevel === undefined ? {} : { isolationLevel: this.#isolationLevel }),
        topics: [...topics.values()],
      });
    } catch (err) {
      // OFFSET_OUT_OF_RANGE comes back as an error carrying the response: reset those partitions.
      const res = (err as { response?: Awaited<ReturnType<PltConsumer['fetch']>> } | null)?.response;
      const out: FetchedPart[] = [];
      for (const t of res?.responses ?? [])
        for (const p of t.partitions)
          if (p.errorCode === OFFSET_OUT_OF_RANGE) {
            const topic = byId.get(t.topicId);
            if (topic !== undefined)
              out.push({ topic, partition: p.partitionIndex, messages: [], outOfRange: true });
          }
      if (out.length > 0) return out;
      throw err;
    }
    const out: FetchedPart[] = [];
    for (const t of response.responses) {
      const topic = byId.get(t.topicId);
      if (topic === undefined) continue;
      for (const p of t.partitions) {
        const messages: ClientMessage[] = [];
        let end: bigint | undefined;
        for (const batch of p.records ?? []) {
          const batchEnd = batch.firstOffset + BigInt(batch.lastOffsetDelta) + 1n;
          if (end === undefined || batchEnd > end) end = batchEnd;
          if (batch.attributes & IS_CONTROL) continue;
          for (const r of batch.records) {
            messages.push({
              offset: (batch.firstOffset + BigInt(r.offsetDelta)).toString(),
              key: r.key,
              value: r.value,
              headers: headersOf(r.headers),
              timestamp: (batch.firstTimestamp + r.timestampDelta).toString(),
            });
          }
        }
        out.push({
          topic,
          partition: p.partitionIndex,
          messages,
          ...(end === undefined ? {} : { next: end }),
        });
      }
    }
    return out;
  }

  async #position(topic: string, partition: number): Promise<bigint> {
    return (await this.#committed(topic, partition)) ?? this.#reset(topic, partition);
  }

  async #committed(topic: string, partition: number): Promise<bigint | undefined> {
    const committed = await this.#consumer.listCommittedOffsets({
      topics: [{ topic, partitions: [partition] }],
    });
    const offset = committed.get(topic)?.[partition];
    return offset !== undefined && offset >= 0n ? offset : undefined;
  }

  async #reset(topic: string, partition: number): Promise<bigint> {
    const offsets = await this.#consumer.listOffsets({
      topics: [topic],
      partitions: { [topic]: [partition] },
      timestamp: this.#fromBeginning ? -2n : -1n,
    });
    const offset = offsets.get(topic)?.[partition];
    if (offset === undefined)
      throw new Error(`no ${this.#fromBeginning ? 'earliest' : 'latest'} offset for ${topic}/${partition}`);
    return offset;
  }

  /**
   * Commits `next`, only while `owned()`.
   *
   * Classic protocol: one OffsetCommit with the member's current generation, sent here (the
   * library's own `commit` answers a generation error by rejoining and committing again; a
   * rejoin of the group's leader starts another rebalance, so under churn the commits of a leader
   * kept the group rebalancing). A generation error rejects; the heartbeat rejoins, as kafkajs does.
   *
   * KIP-848: the library's `commit` (its rejoin is a no-op there; the member epoch is its own). The
   * offsets are read each time it builds the request, its retries included: once the partition is
   * revoked the request carries nothing for it, and the commit rejects as revoked.
   */
  async #commit(topic: string, partition: number, next: bigint, owned: () => boolean): Promise<void> {
    if (!this.#kip848) {
      await this.#commitClassic(topic, partition, next, owned);
      return;
    }
    let sentEmpty = false;
    const request = {
      get offsets() {
        if (owned()) {
          sentEmpty = false;
          return [{ topic, partition, offset: next, leaderEpoch: -1 }];
        }
        sentEmpty = true;
        return [];
      },
    };
    await this.#consumer.commit(request);
    if (sentEmpty) throw new PartitionRevokedError(topic, partition);
  }

  #offsetCommitApi: Promise<typeof offsetCommitV8.api> | undefined;

  async #commitClassic(topic: string, partition: number, next: bigint, owned: () => boolean): Promise<void> {
    const consumer = this.#consumer;
    this.#offsetCommitApi ??= consumer.listApis().then((apis) => {
      const v = apis.find((a) => a.name === 'OffsetCommit');
      if (!v || v.maxVersion < 8) throw new Error('the broker does not speak OffsetCommit v8 or later');
      return v.maxVersion >= 9 ? offsetCommitV9.api : offsetCommitV8.api;
    });
    this.#offsetCommitApi.catch(() => {
      this.#offsetCommitApi = undefined;
    });
    const api = await this.#offsetCommitApi;
    const coordinator = await consumer.findGroupCoordinator();
    const connection = (await consumer.connectToBrokers([coordinator])).get(coordinator);
    if (!connection) throw new Error(`no connection to the group coordinator ${coordinator}`);
    const memberId = consumer.memberId;
    if (!owned() || memberId === null) throw new PartitionRevokedError(topic, partition);
    await api.async(connection, consumer.groupId, this.#generation, memberId, consumer.groupInstanceId, [
      {
        name: topic,
        partitions: [
          {
            partitionIndex: partition,
            committedOffset: next,
            committedLeaderEpoch: -1,
            committedMetadata: null,
          },
        ],
      },
    ]);
  }
}

/** Text or bytes as bytes (null stays null). */
const bytes = (v: Buffer | string | null | undefined): Buffer | undefined =>
  v === null || v === undefined ? undefined : Buffer.isBuffer(v) ? v : Buffer.from(v, 'utf8');

/**
 * Headers as the producer writes them. A repeated header is one entry per value: each entry's
 * key is its own Buffer object, so the library's Map keeps them apart.
 */
function outgoingHeaders(headers: ClientHeaders): Map<Buffer, Buffer> {
  const out = new Map<Buffer, Buffer>();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.set(Buffer.from(name, 'utf8'), bytes(v)!);
  }
  return out;
}

function platformaticProducer(
  options: PlatformaticOptions,
  settings: Readonly<Record<string, unknown>>,
): ClientProducer {
  const producer = new Producer<Buffer, Buffer, Buffer, Buffer>({
    partitioner: compatiblePartitioner(),
    ...options,
    ...settings,
    idempotent: true,
    acks: -1,
    maxInflights: 1,
  } as ProducerOptions<Buffer, Buffer, Buffer, Buffer>);
  return {
    connect: async () => {
      await producer.connectToBrokers(null);
    },
    send: async (topicMessages, sendOptions) => {
      const messages = topicMessages.flatMap(({ topic, messages: ms }) =>
        ms.map((m: OutgoingMessage) => {
          const key = bytes(m.key);
          // A tombstone's value is null on the wire; the library's type says Buffer.
          const value = (bytes(m.value) ?? null) as Buffer;
          return { topic, value, headers: outgoingHeaders(m.headers), ...(key === undefined ? {} : { key }) };
        }),
      );
      if (messages.length === 0) return;
      const sent = producer.send({ messages, acks: -1 });
      const timeoutMs = sendOptions?.timeoutMs;
      if (timeoutMs === undefined) {
        await sent;
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          sent,
          new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`@platformatic/kafka: no acknowledgement within ${timeoutMs} ms`)),
              timeoutMs,
            );
          }),
        ]);
      } finally {
        clearTimeout(timer);
      }
    },
    disconnect: () => producer.close(),
  };
}

function platformaticAdmin(options: PlatformaticOptions): ClientAdmin {
  const admin = new Admin(options);
  return {
    connect: async () => {
      await admin.connectToBrokers(null);
    },
    listTopics: () => admin.listTopics(),
    retentionMs: async (topics) => {
      const out = new Map<string, number>();
      if (topics.length === 0) return out;
      const res = await admin.describeConfigs({
        resources: topics.map((name) => ({
          resourceType: 2,
          resourceName: name,
          configurationKeys: ['retention.ms'],
        })),
      });
      for (const r of res) {
        const value = r.configs.find((c) => c.name === 'retention.ms')?.value;
        if (value !== undefined && value !== null) out.set(r.resourceName, Number(value));
      }
      return out;
    },
    committedMetadata: async (groupId, topic) => {
      const res = await admin.listConsumerGroupOffsets({ groups: [groupId] });
      const map = new Map<number, string | null>();
      for (const g of res)
        for (const t of g.topics)
          if (t.name === topic)
            for (const p of t.partitions) map.set(p.partitionIndex, p.metadata ? p.metadata : null);
      return map;
    },
    disconnect: () => admin.close(),
  };
}
