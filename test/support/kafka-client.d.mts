import type { KafkaClient } from '@once/kafka';

/** The client libraries @once/kafka runs on. */
export declare const KAFKA_CLIENTS: readonly ['kafkajs', 'platformatic', 'confluent'];
/** A client library's name. */
export type KafkaClientName = (typeof KAFKA_CLIENTS)[number];
/** The client this run tests (ONCE_KAFKA_CLIENT, kafkajs by default). */
export declare function kafkaClientName(): KafkaClientName;
/** The group protocol this run asks for (ONCE_KAFKA_GROUP_PROTOCOL, classic by default). */
export declare function kafkaGroupProtocol(): 'classic' | 'consumer';
/** The test brokers. */
export declare function testBrokers(): string[];
/** A once Kafka client on the run's client library, connecting to `brokers` (the test brokers by default). */
export declare function onceKafka(clientId: string, brokers?: readonly string[]): Promise<KafkaClient>;
