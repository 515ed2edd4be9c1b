import { defineConfig } from "vitest/config";

/**
 * Three tiers (`npm test` runs all of them, as CI does; docs in AGENTS.md):
 * - unit: pure logic and in-process servers, seconds — `npm run test:unit` in the inner loop;
 * - e2e: real runs of the CLI and the loop with git, processes, the sandbox, kill -9, chromium;
 * - agents: the six real coding-agent CLIs and the llm researcher against the fake model server.
 * A test file is in unit unless listed below.
 */
const AGENTS = [
  "test/agents.contract.test.ts",
  "test/agents.*.contract.test.ts",
  "test/agents-sandbox*.test.ts",
  "test/agents-cli.e2e.test.ts",
  "test/llm-agent.test.ts",
];
const E2E = [
  "test/**/*.e2e.test.ts",
  "test/adversarial/**/*.test.ts",
  "test/{builtin-parallel,cli,dashboard.browser,disk-full,export-trajectories,file-patterns,holdout-redaction,ladder,library,loop}.test.ts",
  "test/{parallel,resume,run-budget,run-start,runner,sandbox,search-faults,slurm-executor,tiny-lm,trust-holdout-alarm,workspace,workspace-reset}.test.ts",
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Tests spawn real processes and git; two cores, so keep parallelism modest.
    maxWorkers: 2,
    // One TMPDIR per run, removed at the end (test/global-setup.ts).
    globalSetup: ["test/global-setup.ts"],
    projects: [
      { extends: true, test: { name: "unit", include: ["test/**/*.test.ts"], exclude: [...E2E, ...AGENTS] } },
      { extends: true, test: { name: "e2e", include: E2E, exclude: AGENTS } },
      { extends: true, test: { name: "agents", include: AGENTS } },
    ],
  },
});
