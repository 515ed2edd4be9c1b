import { existsSync } from "node:fs";
import { join } from "node:path";
import { prepareStateDir, programPath, stateDirOf } from "../app/lab.ts";
import { AutolabError } from "../core/errors.ts";
import { SqliteLedger } from "../ledger/sqlite-ledger.ts";
import { startServer } from "../server/serve.ts";

export interface ServeFlags {
  program?: string;
  port: number;
  host: string;
  token?: string;
}

/** The notebook of `--program`; an empty one is made for a project that has not run yet. */
export function notebookPath(program: string | undefined): { ledgerPath: string; stateDir: string } {
  const file = programPath(program);
  const stateDir = stateDirOf(file);
  const ledgerPath = join(stateDir, "lab.db");
  if (!existsSync(ledgerPath)) {
    if (!existsSync(file)) {
      throw new AutolabError(
        "NO_NOTEBOOK",
        `no lab notebook at ${ledgerPath} (and no program.md at ${file}).`,
        "Run this in the project directory, or pass --program <path to program.md>.",
      );
    }
    prepareStateDir(stateDir);
    new SqliteLedger(ledgerPath).close();
  }
  return { ledgerPath, stateDir };
}

/** `autolab serve`: the dashboard and API until Ctrl-C. */
export async function serveCommand(flags: ServeFlags): Promise<void> {
  const { ledgerPath, stateDir } = notebookPath(flags.program);
  const token = flags.token ?? (process.env.AUTOLAB_TOKEN || undefined);
  const server = await startServer({
    ledgerPath,
    stateDir,
    port: flags.port,
    host: flags.host,
    ...(token ? { token } : {}),
  });
  process.stdout.write(
    `autolab dashboard: ${server.url}\n  notebook ${ledgerPath} (read-only)${token ? "; every request needs the token" : ""}. Ctrl-C stops.\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
  await server.close();
}
