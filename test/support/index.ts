// Test support shared by every integration test, in packages/*/test/integration and test/:
//   import { createTestPool, freshSchemaName, ... } from '../../../test/support/index.js';
// global-setup.ts is not re-exported: vitest loads it by path, in the main process.
export * from './child.js';
export * from './core-builds.js';
export * from './databases.js';
export * from './db.js';
export * from './env.js';
export * from './fault-proxy.js';
export * from './isolation.js';
export * from './kafka.js';
export * from './kafka-setup.js';
export * from './ledger.js';
export * from './wait.js';
