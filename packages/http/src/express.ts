// Placeholder so the package's "./express" export resolves; the express binding (Fastify 5 / Express 5)
// replaces this file on the http-bindings branch.
export {};
