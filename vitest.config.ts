import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: two test files at a time keeps concurrency tests honest about contention.
    maxWorkers: 2,
    reporters: ["default"],
    // The SDK warns once per process that its 2027 releases will need Node 22; we pin it.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
