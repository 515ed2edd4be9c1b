import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // One TMPDIR per run, removed at the end (test/global-setup.ts).
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Tests spawn real processes and git; two cores, so keep parallelism modest.
    maxWorkers: 2,
  },
});
