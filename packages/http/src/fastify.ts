// Placeholder so the package's "./fastify" export resolves; the fastify binding (Fastify 5 / Express 5)
// replaces this file on the http-bindings branch.
export {};
