// The test application through @once/http/node's listener (over the Fetch binding).
import { nodeListener } from '@once/http/node';
import { listen as listenFetch } from './fetch.mjs';

export const listen = (options) => listenFetch({ ...options, toListener: nodeListener });
