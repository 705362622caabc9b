import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { SERVICE_ENV_DEFAULTS, type ServiceEnvName, type ServiceUrls, serviceUrls } from './env.js';
import { warmUpKafka } from './kafka-setup.js';

// Vitest globalSetup of the integration project. Integration tests need all four real services;
// a missing one is a failure with a message saying how to start it, never a silent skip.

declare module 'vitest' {
  export interface ProvidedContext {
    /** The urls the global setup probed; also in process.env, which workers inherit. */
    serviceUrls: ServiceUrls;
    /** The service containers' ids when ONCE_SERVICES=testcontainers; empty on the native services. */
    serviceContainers: readonly string[];
    /** The containers' bridge network when ONCE_SERVICES=testcontainers (loopback-only ports). */
    serviceNetwork: string;
  }
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PROBE = fileURLToPath(new URL('../../scripts/probe.mjs', import.meta.url));

interface ProbeResult {
  readonly service: string;
  readonly ok: boolean;
  readonly url: string;
  readonly detail: string;
}

/** Runs scripts/probe.mjs (the same protocol-level checks `scripts/services` waits on). */
function probe(): ProbeResult[] {
  const out = spawnSync(process.execPath, [PROBE, '--json'], { encoding: 'utf8', env: process.env });
  const results = (out.stdout ?? '')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ProbeResult);
  // A probe that crashed reports nothing; that must not read as "nothing is down".
  if (results.length !== Object.keys(SERVICE_ENV_DEFAULTS).length) {
    throw new Error(`scripts/probe.mjs failed (exit ${out.status}): ${out.stderr || out.error?.message}`);
  }
  return results;
}

/**
 * Fills in the defaults, makes sure every service answers (starting them natively once if not).
 * With ONCE_SERVICES=testcontainers it builds the local images instead (scripts/images, cached),
 * starts the services in containers on random loopback ports, points the four variables at them,
 * and returns the teardown that removes the containers.
 */
export async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const mode = process.env.ONCE_SERVICES ?? 'native';
  if (mode === 'testcontainers') return setupContainers(project);
  if (mode !== 'native') {
    throw new Error(`ONCE_SERVICES=${mode}: expected native (the default) or testcontainers`);
  }
  for (const [name, value] of Object.entries(SERVICE_ENV_DEFAULTS)) {
    // Set here, in the main process, before any worker is forked: workers inherit process.env.
    if (!process.env[name]) process.env[name] = value;
  }
  let down = probe().filter((r) => !r.ok);
  // Only services at their loopback defaults are ours to start; a custom url points elsewhere.
  const startable = down.filter((r) => (Object.values(SERVICE_ENV_DEFAULTS) as string[]).includes(r.url));
  if (startable.length > 0) {
    console.log(
      `[global-setup] not answering: ${startable.map((r) => r.service).join(', ')}; running scripts/services start`,
    );
    try {
      execFileSync('bash', ['scripts/services', 'start'], { cwd: ROOT, stdio: 'inherit', env: process.env });
    } catch {
      // The re-probe below reports what is still down.
    }
    down = probe().filter((r) => !r.ok);
  }
  if (down.length > 0) {
    const lines = down.map((r) => `  ${r.service} at ${r.url}: ${r.detail}`).join('\n');
    const vars = down.map((r) => envNameOf(r.service)).join(', ');
    throw new Error(
      `Integration tests need real services, and these do not answer:\n${lines}\n` +
        `Start them with \`npm run services start\` (logs in .services/logs/), or \`docker compose up -d --wait\`, ` +
        `or point ${vars} at running ones.`,
    );
  }
  // The broker may have started a moment ago (here, or by `scripts/services start` in CI): its
  // group coordinator is made ready once, before any test asks for it.
  await warmUpKafka(serviceUrls().kafkaBrokers);
  project.provide('serviceUrls', serviceUrls());
  project.provide('serviceContainers', []);
  project.provide('serviceNetwork', '');
  return undefined;
}

async function setupContainers(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now();
  execFileSync('bash', ['scripts/images', 'build'], { cwd: ROOT, stdio: 'inherit', env: process.env });
  const t1 = Date.now();
  const { startServiceContainers } = await import('./containers.js');
  const containers = await startServiceContainers();
  // Set here, in the main process, before any worker is forked: workers inherit process.env.
  Object.assign(process.env, containers.urls);
  // Tests that drive the broker with rabbitmqctl run it in the container (docker exec).
  process.env.ONCE_RABBITMQ_CONTAINER = containers.ids[3];
  console.log(
    `[global-setup] images ready in ${t1 - t0} ms, containers answering after ${Date.now() - t1} ms: ` +
      Object.values(containers.urls).join(' '),
  );
  project.provide('serviceUrls', serviceUrls());
  project.provide('serviceContainers', containers.ids);
  project.provide('serviceNetwork', containers.network);
  return async () => {
    const t = Date.now();
    await containers.stop();
    console.log(`[global-setup] containers removed in ${Date.now() - t} ms`);
  };
}

function envNameOf(service: string): ServiceEnvName {
  const names: Record<string, ServiceEnvName> = {
    postgres: 'DATABASE_URL',
    kafka: 'KAFKA_BROKERS',
    sqs: 'SQS_ENDPOINT',
    rabbitmq: 'AMQP_URL',
    nats: 'NATS_URL',
  };
  return names[service] ?? 'DATABASE_URL';
}
