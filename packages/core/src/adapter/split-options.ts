import { type Defined, type InboxOptions, MOVED_INBOX_OPTIONS } from '../engine/options.js';
import { nearest } from '../nearest.js';
import { checkFunction, invalidOption, namingFactory } from '../option-check.js';
import { retiredOption } from './retired-options.js';

// Every key of InboxOptions: the Record type makes the compiler fail when core adds an option
// and this list does not, so an adapter never rejects a real inbox option as unknown.
const INBOX_KEY_SET: Record<keyof InboxOptions, true> = {
  pool: true,
  databases: true,
  route: true,
  consumer: true,
  handler: true,
  schema: true,
  idOf: true,
  fingerprintOf: true,
  conflictPolicy: true,
  storeResult: true,
  recordFailed: true,
  maxAttempts: true,
  lockTimeoutMs: true,
  handlerTimeoutMs: true,
  statementTimeoutMs: true,
  connectTimeoutMs: true,
  retentionMs: true,
  retryDelayMs: true,
  classify: true,
  failedBodyMaxBytes: true,
  batchMode: true,
  isolation: true,
  busyDelayMs: true,
  logger: true,
  outbox: true,
  mode: true,
};

/** The option names core's inbox takes; an adapter's consumer options are these plus its own. */
export const INBOX_OPTION_KEYS: readonly (keyof InboxOptions)[] = Object.freeze(
  Object.keys(INBOX_KEY_SET) as (keyof InboxOptions)[],
);

/**
 * The option names an adapter adds to the inbox's. An adapter lists them once, as
 * `{ groupId: true, … } satisfies Record<AdapterOptionKey<KafkaConsumerOptions>, true>`, so the
 * compiler refuses the list when it misses an option of the interface or names one it lacks.
 */
export type AdapterOptionKey<O> = Exclude<keyof O, keyof InboxOptions> & string;

/**
 * An adapter's options after defaults: the fields `K` of `O`, each present, read-only, and without
 * `undefined` (as core's `Defined` does for the inbox's). A field whose resolved type differs
 * (derived, or still optional after defaults) is left out of `K` and declared by the adapter's
 * interface next to this one.
 */
export type ResolvedOptions<O, K extends keyof O> = Defined<Pick<O, K>>;

/** What {@link splitOptions} checks besides the inbox's own keys. */
export interface SplitSpec<K extends string> {
  /** What the options are for, in errors: `createKafkaConsumer`. */
  factory: string;
  /** The adapter's own option names: a list, or a key set (`{ groupId: true, … }`). */
  adapterKeys: readonly K[] | Readonly<Record<K, true>>;
  /**
   * Names that must be given (not undefined), inbox ones included: `handler` always is, and `pool`
   * unless `databases` is given.
   */
  required?: readonly string[];
}

/**
 * Splits a consumer's options into the inbox's and the adapter's. Rejects, with `INVALID_OPTION`,
 * a key that is neither (naming the nearest known one: a typo such as `maxAttemps` would
 * otherwise be ignored and the default silently used) and a required key that is missing.
 * Values are not validated here (core resolves the inbox's, the adapter its own), except that
 * `handler` must be a function.
 */
export function splitOptions<O extends object, K extends keyof O & string>(
  options: O,
  spec: SplitSpec<K>,
): {
  /** The options that are not the adapter's, for the inbox. */
  inbox: Omit<O, K>;
  /** The adapter's own options (the keys of `adapterKeys`). */
  adapter: Pick<O, K>;
} {
  return namingFactory(spec.factory, () => split(options, spec));
}

function split<O extends object, K extends keyof O & string>(
  options: O,
  spec: SplitSpec<K>,
): { inbox: Omit<O, K>; adapter: Pick<O, K> } {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw invalidOption('', `must be an object, got ${JSON.stringify(options)}`);
  }
  const ownKeys: readonly string[] = Array.isArray(spec.adapterKeys)
    ? spec.adapterKeys
    : Object.keys(spec.adapterKeys);
  const known = [...INBOX_OPTION_KEYS, ...ownKeys];
  const adapterKeys = new Set<string>(ownKeys);
  const inbox: Record<string, unknown> = {};
  const adapter: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    if (adapterKeys.has(key)) adapter[key] = value;
    else if (key in INBOX_KEY_SET) inbox[key] = value;
    else if (MOVED_INBOX_OPTIONS[key] !== undefined) {
      throw invalidOption(key, `is no longer an option of its own: write ${MOVED_INBOX_OPTIONS[key]}`);
    } else if (retiredOption(spec.factory, key) !== undefined) {
      throw invalidOption(key, `${retiredOption(spec.factory, key)} (see CHANGELOG.md)`);
    } else {
      const near = nearest(key, known);
      throw invalidOption(key, `is unknown${near ? `; did you mean '${near}'?` : ''}`);
    }
  }
  // An inbox over several databases names them in `databases` instead of `pool` (core checks that
  // pair and `route`): then `pool` is not required.
  const given = options as Record<string, unknown>;
  const database = given.databases === undefined ? ['pool'] : [];
  for (const key of [...database, 'handler', ...(spec.required ?? [])]) {
    if (given[key] === undefined) {
      throw invalidOption(key, 'is required');
    }
  }
  // Checked here, not left to core: adapters wrap the handler before the inbox sees it.
  checkFunction('handler', (options as Record<string, unknown>).handler);
  return { inbox: inbox as Omit<O, K>, adapter: adapter as Pick<O, K> };
}

/** An adapter's own options over its defaults: a key given as `undefined` takes the default. */
export function withDefaults<D extends object, A extends object>(defaults: D, given: A): D & A {
  const defined = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
  return { ...defaults, ...defined } as D & A;
}
