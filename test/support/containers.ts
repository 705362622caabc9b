import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SERVICE_ENV_DEFAULTS } from './env.js';
import { warmUpKafka } from './kafka-setup.js';

// The opt-in container path of the integration harness (ONCE_SERVICES=testcontainers): the four
// services in containers started with testcontainers from the local images scripts/images builds,
// each port published on a random loopback port, and removed again by the harness (no Ryuk reaper:
// its image would come from a registry). Loaded by the global setup only in that mode, so a run on
// the native services never imports testcontainers.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PROBE = fileURLToPath(new URL('../../scripts/probe.mjs', import.meta.url));
/** Every container and network the harness creates carries this label, valued with its pid. */
export const HARNESS_LABEL = 'dev.once.harness.pid';
/** The only address a published port may be bound to. */
const LOOPBACK = '127.0.0.1';

/** The images, as `scripts/images env` names them (ONCE_IMAGE_* overrides included). */
export function serviceImages(): Record<'postgres' | 'kafka' | 'sqs' | 'rabbitmq', string> {
  const out = execFileSync('bash', ['scripts/images', 'env'], { cwd: ROOT, encoding: 'utf8' });
  const names = Object.fromEntries(
    [...out.matchAll(/^export ONCE_IMAGE_([A-Z]+)=(.+)$/gm)].map((m) => [m[1], m[2]]),
  );
  const image = (name: string): string => {
    const value = names[name];
    if (!value) throw new Error(`scripts/images env printed no ONCE_IMAGE_${name}:\n${out}`);
    return value;
  };
  return {
    postgres: image('POSTGRES'),
    kafka: image('KAFKA'),
    sqs: image('SQS'),
    rabbitmq: image('RABBITMQ'),
  };
}

export interface ServiceContainers {
  /**
   * The four urls, at the containers' published loopback ports. NATS has no image here yet: its
   * url stays what the environment (or the native default) says.
   */
  readonly urls: Record<keyof typeof SERVICE_ENV_DEFAULTS, string>;
  /** The containers' ids, postgres, kafka, sqs, rabbitmq in that order. */
  readonly ids: readonly string[];
  /** Their bridge network, whose ports are published on loopback only; a test's own containers join it. */
  readonly network: string;
  /** Stops and removes the containers and their network. */
  stop(): Promise<void>;
}

/**
 * Starts the four services in containers on a network of their own and waits until each answers
 * its protocol (scripts/probe.mjs). Fails, removing what it started, if any port is published
 * anywhere but on loopback.
 */
export async function startServiceContainers(): Promise<ServiceContainers> {
  // Read when testcontainers first looks for a reaper; set before it is imported.
  process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';
  // Where testcontainers reaches a published port. Left to itself, a process that runs inside a
  // container (/.dockerenv, as on a CI runner) gets the default bridge's gateway, a private
  // address, and the ports listen on loopback only: pinned here, and in the npm script, so the
  // test workers resolve the same host.
  process.env.TESTCONTAINERS_HOST_OVERRIDE = LOOPBACK;
  const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
  const images = serviceImages();
  const client = await getContainerRuntimeClient();
  await removeOrphans();
  const labels = { [HARNESS_LABEL]: String(process.pid) };
  // A bridge of its own. Its ports are published on loopback (the daemon's "ip" setting covers
  // only the default bridge; testcontainers names no host address), and without masquerading
  // nothing the containers send is translated to the host's address.
  const network = await client.network.create({
    Name: `once-harness-${process.pid}-${Date.now()}`,
    Driver: 'bridge',
    CheckDuplicate: true,
    Labels: labels,
    Options: {
      'com.docker.network.bridge.host_binding_ipv4': LOOPBACK,
      'com.docker.network.bridge.enable_ip_masquerade': 'false',
    },
  });
  const networkName = (await network.inspect()).Name as string;
  const base = (image: string, port: number, ready: RegExp) =>
    new GenericContainer(image)
      .withNetworkMode(networkName)
      .withLabels(labels)
      .withExposedPorts(port)
      .withWaitStrategy(Wait.forLogMessage(ready))
      .withStartupTimeout(120_000);

  // Kafka must advertise the port the host sees, known only once the container runs: the image's
  // entrypoint waits for KAFKA_ADVERTISED_LISTENERS_FILE, written below. The broker's own
  // traffic uses a second listener inside the container.
  const advertisedFile = '/tmp/once-advertised-listeners';
  const started = await Promise.allSettled([
    base(images.postgres, 5432, /database system is ready to accept connections/)
      .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust', POSTGRES_DB: 'test' })
      .start(),
    base(images.kafka, 9092, /waiting for/)
      .withEnvironment({
        CLUSTER_ID: 'b25jZS1sb2NhbC1rcmFmdA',
        KAFKA_ADVERTISED_LISTENERS_FILE: advertisedFile,
        KAFKA_NODE_ID: '1',
        KAFKA_PROCESS_ROLES: 'broker,controller',
        KAFKA_CONTROLLER_QUORUM_VOTERS: '1@127.0.0.1:9093',
        KAFKA_LISTENERS: 'PLAINTEXT://:9092,BROKER://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093',
        KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
        KAFKA_INTER_BROKER_LISTENER_NAME: 'BROKER',
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT',
        KAFKA_LOG_DIRS: '/tmp/kraft-combined-logs',
        KAFKA_NUM_PARTITIONS: '1',
        KAFKA_DEFAULT_REPLICATION_FACTOR: '1',
        KAFKA_MIN_INSYNC_REPLICAS: '1',
        KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
        KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS: '1',
        KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
        KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
        KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS: '1',
        KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'true',
        KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
        KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS: '1000',
        KAFKA_LOG_SEGMENT_BYTES: '1048576',
        KAFKA_HEAP_OPTS: '-Xms256m -Xmx512m',
      })
      .start(),
    base(images.sqs, 9324, /ElasticMQ server .* started/).start(),
    base(images.rabbitmq, 5672, /Server startup complete/).start(),
  ]);
  const containers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const stop = async () => {
    // Nothing in them is kept: a second is all RabbitMQ gets of the six its clean shutdown takes.
    await Promise.allSettled(
      containers.map((c) => c.stop({ timeout: 1_000, remove: true, removeVolumes: true })),
    );
    await client.network.remove(network).catch(() => {});
  };
  try {
    const failed = started.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []));
    if (failed.length > 0) throw new Error(`service containers did not start:\n${failed.join('\n')}`);
    const [postgres, kafka, sqs, rabbitmq] = containers as [
      (typeof containers)[0],
      (typeof containers)[0],
      (typeof containers)[0],
      (typeof containers)[0],
    ];
    const ids = containers.map((c) => c.getId());
    const offLoopback = await publishedOffLoopback(ids);
    if (offLoopback.length > 0) {
      throw new Error(`refusing to run: container ports published off loopback: ${offLoopback.join(', ')}`);
    }
    const kafkaPort = kafka.getMappedPort(9092);
    await kafka.copyContentToContainer([
      { content: `PLAINTEXT://${LOOPBACK}:${kafkaPort},BROKER://127.0.0.1:9094`, target: advertisedFile },
    ]);
    const urls = {
      DATABASE_URL: `postgres://postgres@${LOOPBACK}:${postgres.getMappedPort(5432)}/test`,
      KAFKA_BROKERS: `${LOOPBACK}:${kafkaPort}`,
      SQS_ENDPOINT: `http://${LOOPBACK}:${sqs.getMappedPort(9324)}`,
      AMQP_URL: `amqp://guest:guest@${LOOPBACK}:${rabbitmq.getMappedPort(5672)}`,
      NATS_URL: process.env.NATS_URL ?? SERVICE_ENV_DEFAULTS.NATS_URL,
    };
    const probe = spawnSync(process.execPath, [PROBE, '--wait', '120'], {
      encoding: 'utf8',
      env: { ...process.env, ...urls },
    });
    if (probe.status !== 0) {
      const logs = await Promise.all(containers.map((c) => tail(c.getId())));
      throw new Error(
        `service containers do not answer:\n${probe.stdout}${probe.stderr}\n${logs.join('\n')}`,
      );
    }
    await warmUpKafka([urls.KAFKA_BROKERS]);
    return { urls, ids, network: networkName, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** `host:port` of every published port of these containers bound anywhere but 127.0.0.1. */
export async function publishedOffLoopback(ids: readonly string[]): Promise<string[]> {
  const { getContainerRuntimeClient } = await import('testcontainers');
  const client = await getContainerRuntimeClient();
  const bad: string[] = [];
  for (const id of ids) {
    const info = await client.container.inspect(client.container.getById(id));
    for (const [port, bindings] of Object.entries(info.NetworkSettings.Ports ?? {})) {
      for (const b of bindings ?? []) {
        if (b.HostIp !== LOOPBACK)
          bad.push(`${info.Name} ${port} on ${b.HostIp || '(all addresses)'}:${b.HostPort}`);
      }
    }
  }
  return bad;
}

/** The last lines a container printed, for a failure message. */
async function tail(id: string): Promise<string> {
  const out = spawnSync('docker', ['logs', '--tail', '15', id], { encoding: 'utf8' });
  return `--- ${id.slice(0, 12)}\n${out.stdout}${out.stderr}`;
}

/**
 * Removes containers and networks an earlier harness left behind when it was killed before its
 * teardown (there is no reaper): only those whose labelled pid is no longer running.
 */
async function removeOrphans(): Promise<void> {
  const { getContainerRuntimeClient } = await import('testcontainers');
  const { container, network } = await getContainerRuntimeClient();
  const dead = (labels: Record<string, string> | undefined) => {
    const pid = Number(labels?.[HARNESS_LABEL]);
    if (!Number.isInteger(pid) || pid <= 0) return false;
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  };
  const all = await container.dockerode.listContainers({ all: true, filters: { label: [HARNESS_LABEL] } });
  for (const c of all.filter((c) => dead(c.Labels))) {
    await container.dockerode.getContainer(c.Id).remove({ force: true, v: true });
  }
  const networks = await container.dockerode.listNetworks({ filters: { label: [HARNESS_LABEL] } });
  for (const n of networks.filter((n) => dead(n.Labels))) {
    await network.remove(network.getById(n.Id)).catch(() => {});
  }
}

/** The host addresses a TCP port is listened on (from /proc/net/tcp and tcp6), as printed by `ss`. */
export function listeningAddresses(port: number): string[] {
  const found: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (state !== '0A' || !local) continue; // 0A: LISTEN
      const [hexAddr, hexPort] = local.split(':') as [string, string];
      if (Number.parseInt(hexPort, 16) !== port) continue;
      found.push(decodeProcAddress(hexAddr));
    }
  }
  return found;
}

/** /proc/net/tcp's address: hex 32-bit words, each in the host's (little-endian) byte order. */
export function decodeProcAddress(hex: string): string {
  const words = hex.match(/.{8}/g) ?? [];
  const bytes = words.flatMap((w) => (w.match(/../g) ?? []).reverse().map((b) => Number.parseInt(b, 16)));
  if (bytes.length === 4) return bytes.join('.');
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) {
    return `::ffff:${bytes.slice(12).join('.')}`;
  }
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0));
  // The longest run of two or more zero groups becomes '::' (RFC 5952).
  let best = { at: -1, len: 1 };
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.len) best = { at: i, len: j - i };
    i = j === i ? i + 1 : j;
  }
  const hexes = groups.map((g) => g.toString(16));
  if (best.at < 0) return hexes.join(':');
  return `${hexes.slice(0, best.at).join(':')}::${hexes.slice(best.at + best.len).join(':')}`;
}
