// The contract between `npm run demo` (scripts/demo.mjs) and an example's demo.mjs. Examples
// type their default export with it: `/** @type {import('../../scripts/demo/example-contract.js').DemoExample} */`.

/** What the runner passes to `prepare`. */
export interface DemoPrepareArgs {
  /** PostgreSQL connection string (from `scripts/services env` or the environment). */
  databaseUrl: string;
  /** A short id unique to this demo run: use it in schema, topic, queue and group names. */
  run: string;
  /** Unique messages to publish. */
  count: number;
  /** Share (0..1) of the unique messages to publish a second time with the same message id. */
  dupShare: number;
}

/** One consumer process: `node <script> ...args`, with `env` added to the runner's environment. */
export interface DemoConsumerSpec {
  script: string;
  args: string[];
  env: Record<string, string>;
}

/** Effect rows written so far, and the distinct message ids among them. */
export interface DemoEffects {
  total: number;
  unique: number;
}

/** One stage's effect rows, for {@link DemoPrepared.stages}. */
export interface DemoStage extends DemoEffects {
  /** A short label, e.g. `charges`. */
  name: string;
}

/** What `prepare` returns once the messages are published. */
export interface DemoPrepared {
  /**
   * Messages published, duplicates included. Read again when the row ends, so an example whose
   * client keeps sending while the consumers run (HTTP: retries) may count up with a getter.
   */
  readonly sent: number;
  /** Distinct message ids among them: what the effects must reach, once each. */
  unique: number;
  /** Started together; the runner SIGKILLs all of them part-way and starts them again. */
  consumers: DemoConsumerSpec[];
  effects(): Promise<DemoEffects>;
  /** Messages not yet settled anywhere (broker backlog, unacknowledged, outbox rows...). */
  pending(): Promise<number>;
  /**
   * Optional: the effects at each stage of a chain (say the rows an HTTP endpoint wrote, then what
   * a downstream consumer wrote for them), shown under the row; each must also equal `unique`.
   */
  stages?(): Promise<DemoStage[]>;
  /** The example's domain invariant, e.g. "each balance = the sum of its unique payments". */
  verify(): Promise<{ ok: boolean; detail: string }>;
  /** Deletes what `prepare` created and closes its connections. Called even after a failure. */
  cleanup(): Promise<void>;
}

/** The default export of examples/<name>/demo.mjs. */
export interface DemoExample {
  /** The example's folder name. */
  name: string;
  /** The table groups rows by broker; `http` for an example whose messages are HTTP requests. */
  broker: 'kafka' | 'sqs' | 'rabbitmq' | 'nats' | 'http';
  prepare(args: DemoPrepareArgs): Promise<DemoPrepared>;
}
