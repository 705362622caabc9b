import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

// docker-compose.yml pins every image to the version scripts/services runs natively, and the
// README's "Versions tested" table names the same: Kafka and ElasticMQ as the Maven poms fetch
// them (here), PostgreSQL and RabbitMQ as the machine runs them
// (test/integration/service-versions.test.ts).
const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (f: string) => readFileSync(`${root}${f}`, 'utf8');

function images(): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of read('docker-compose.yml').matchAll(
    /^\s+image:\s*(?:\$\{ONCE_IMAGE_[A-Z]+:-)?([^\s:}]+):([^\s}]+)\}?\s*$/gm,
  ))
    out.set(m[1]!, m[2]!);
  return out;
}

function pomVersion(pom: string, artifact: string): string {
  const xml = read(pom);
  const dep = new RegExp(`<artifactId>${artifact}</artifactId>\\s*<version>([^<]+)</version>`).exec(xml);
  const v = dep?.[1] ?? '';
  const prop = /^\$\{(.+)\}$/.exec(v);
  return prop ? (new RegExp(`<${prop[1]}>([^<]+)</`).exec(xml)?.[1] ?? '') : v;
}

it('every compose image has an exact version tag (x.y or x.y.z), none floating', () => {
  const tags = images();
  expect([...tags.keys()].sort()).toEqual(
    ['apache/kafka', 'nats', 'postgres', 'rabbitmq', 'softwaremill/elasticmq-native'].sort(),
  );
  for (const [image, tag] of tags) expect(tag, image).toMatch(/^\d+\.\d+(\.\d+)?(-[a-z]+)?$/);
});

it('Kafka and ElasticMQ tags are the versions scripts/maven fetches', () => {
  const tags = images();
  const kafka = pomVersion('scripts/maven/kafka/pom.xml', 'kafka_2.13');
  const elasticmq = pomVersion('scripts/maven/elasticmq/pom.xml', 'elasticmq-server_2.13');
  // Kafka 4.2 by default (ONCE_KAFKA_VERSION runs another natively, e.g. 3.9.2 or 4.4.0).
  expect(kafka).toMatch(/^4\.2\.\d+$/);
  expect(tags.get('apache/kafka')).toBe(kafka);
  expect(tags.get('softwaremill/elasticmq-native')).toBe(elasticmq);
});

it("the README's versions table names the compose tags", () => {
  const readme = read('README.md');
  for (const [image, tag] of images()) expect(readme, `${image}:${tag}`).toContain(`\`${image}:${tag}\``);
});
