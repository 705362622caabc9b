// The node:http binding is the Fetch binding behind nodeListener: the same server.
export { listen } from './fetch.mjs';
