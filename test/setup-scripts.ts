/**
 * Runs before every test file, in its worker: REDIS_FUNCTIONS=false (as the gateway reads it,
 * src/config.ts) makes the rooms, caches and limiters the tests build in this process run their
 * scripts through EVALSHA, as a gateway on Redis < 7 does; gateways the tests start as processes
 * read the same variable. Unset: Redis Functions (the default).
 */
import { useRedisFunctions } from "../src/redis/scripts.js";

const setting = process.env.REDIS_FUNCTIONS;
useRedisFunctions(setting === undefined || ["true", "1", "yes"].includes(setting));
