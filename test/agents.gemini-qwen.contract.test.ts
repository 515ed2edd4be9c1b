import { statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { agentContract } from "./contracts/agent-contract.ts";
import { cliContractAgent } from "./helpers/cli-contract.ts";

/**
 * The agent contract against the real Gemini CLI and Qwen Code (pinned devDependencies),
 * driven by the fake model server on 127.0.0.1. Both take a few seconds to start: the timeout
 * case would kill them before they reach the model, so only the abort case (which waits for
 * their request, then kills them mid-request) runs; the clock is the harness's, covered by the
 * other backends.
 */
const SLOW_START =
  "starts in seconds, longer than the case's timeout; the abort case kills it mid-request instead";

/**
 * Gemini retries a failing API 10 times over minutes by default: a system settings file (which
 * Gemini reads only where no one else can write, hence a fixture rather than a file in /tmp)
 * sets one attempt.
 */
const GEMINI_NO_RETRIES = join(
  dirname(fileURLToPath(import.meta.url)),
  "fake-model",
  "gemini-no-retries.json",
);

/** Whether some directory above `file` is writable by others (then Gemini ignores the settings file). */
function underOtherWritableDir(file: string): boolean {
  for (let d = dirname(file); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o002) !== 0) return true;
    if (dirname(d) === d) return false;
  }
}

/** Gemini's policy file denies edits but of the editable files; its file tools stay in the workspace. */
agentContract(
  "gemini",
  cliContractAgent("gemini", ({ fake, env }) => ({
    baseUrl: fake.url,
    env: { ...env, GEMINI_CLI_SYSTEM_SETTINGS_PATH: GEMINI_NO_RETRIES },
  })),
  {
    protectedEdit: "blocked",
    readsOutside: "blocked",
    reportsUsage: true,
    usesModel: true,
    skip: {
      timeout: `Gemini CLI ${SLOW_START}`,
      ...(underOtherWritableDir(GEMINI_NO_RETRIES)
        ? {
            error:
              "this checkout lies under a directory others can write to (e.g. /tmp), where Gemini ignores the no-retries settings file and retries for minutes; the parser's unit test covers the outcome",
          }
        : {}),
    },
  },
);

/** Qwen Code in approval mode default: only the Edit(//path) allow rules pass, the rest is declined. */
agentContract(
  "qwen",
  cliContractAgent("qwen", ({ fake }) => ({ baseUrl: `${fake.url}/v1` })),
  {
    protectedEdit: "blocked",
    readsOutside: "blocked",
    reportsUsage: true,
    usesModel: true,
    skip: {
      timeout: `Qwen Code ${SLOW_START}`,
      error:
        "Qwen Code retries a failing API 7 times over ~75 s, not configurable: parseQwenJson's unit test covers the outcome",
    },
  },
);
