import { pino, type Logger } from "pino";

export type { Logger };

/**
 * The one logger. Children carry the request id (per request) or the job id (per job).
 * Secrets that might ride along in a logged object are redacted by path.
 */
export function createLogger(options: { level: string; name?: string }): Logger {
  return pino({
    name: options.name ?? "gateway",
    level: options.level,
    redact: {
      paths: [
        "req.headers.authorization",
        'req.headers["x-load-test-token"]',
        "headers.authorization",
        "*.accessToken",
        "*.queueToken",
        "*.paymentToken",
        "adminToken",
        "gatewaySecret",
        "config.adminToken",
        "config.gatewaySecret",
        "loadTestToken",
        "config.loadTestToken",
        // token signing keys (TOKEN_SIGNING_KEYS): a key, a list of them, or the config holding it
        "privateKeyPem",
        "*.privateKeyPem",
        "[*].privateKeyPem",
        "*[*].privateKeyPem",
        "config.tokens.signingKeys[*].privateKeyPem",
        "tokens.signingKeys[*].privateKeyPem",
      ],
      censor: "[redacted]",
    },
  });
}
