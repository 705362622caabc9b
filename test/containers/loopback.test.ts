import { describe, expect, inject, it } from 'vitest';
import { listeningAddresses, publishedOffLoopback } from '../support/containers.js';
import { serviceUrls } from '../support/index.js';

// The service containers of ONCE_SERVICES=testcontainers publish their ports on loopback only:
// the engine's record of every binding, and what actually listens on the host at each published
// port (docker-proxy), are checked, not just the setting that should make it so.
const ids = inject('serviceContainers');
const ports = (() => {
  const urls = serviceUrls();
  return [
    new URL(urls.databaseUrl).port,
    urls.kafkaBrokers[0]?.split(':')[1],
    new URL(urls.sqsEndpoint).port,
    new URL(urls.amqpUrl).port,
  ].map(Number);
})();

describe('service containers', () => {
  it('are the four the harness started', () => {
    expect(ids).toHaveLength(4);
  });

  it('are reached by testcontainers at 127.0.0.1, inside a container or not', async () => {
    // A test's own container (own-handler.test.ts) connects to getHost(); in a container of its
    // own, testcontainers would answer with the bridge gateway unless the harness pins it.
    const { getContainerRuntimeClient } = await import('testcontainers');
    const client = await getContainerRuntimeClient();
    expect(client.info.containerRuntime.host).toBe('127.0.0.1');
  });

  it('publish every port on 127.0.0.1 only', async () => {
    expect(await publishedOffLoopback(ids)).toEqual([]);
  });

  it('are reached through ports that listen on 127.0.0.1 only, none of them a default port', () => {
    expect(ports.every((p) => Number.isInteger(p) && p > 0)).toBe(true);
    expect(ports.filter((p) => [5432, 9092, 9324, 5672].includes(p))).toEqual([]);
    for (const port of ports) {
      expect({ port, addresses: listeningAddresses(port) }).toEqual({ port, addresses: ['127.0.0.1'] });
    }
  });
});
