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
  },
});
