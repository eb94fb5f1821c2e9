import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    // REDIS_FUNCTIONS=false: the scripts through EVALSHA in every test file (.ci/run's second pass).
    setupFiles: ["test/setup-scripts.ts"],
    pool: "forks",
    // Each worker process runs file after file, loading src/ and its libraries once: a file that
    // imports the gateway spent about 0.7 s of CPU loading them again (~90 of the parallel
    // part's ~530 CPU seconds). Files share no state but what they start and stop themselves
    // (their own ids, servers and clients); the serial timing and chaos part keeps one process
    // per file (`--isolate` in package.json).
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Three files at a time on two cores: most files wait on timers, sockets and child processes
    // (two at a time left a third of the CPU idle). The timing test and the chaos suite, which
    // measure, run alone in the serial part (`npm run test:serial`).
    maxWorkers: 3,
    reporters: ["default"],
    // The SDK warns once per process that its 2027 releases will need Node 22; we pin it.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
