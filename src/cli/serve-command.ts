import { existsSync } from "node:fs";
import {
  assertNotEmptied,
  locateNotebook,
  notebookExists,
  prepareStateDir,
  programPath,
} from "../app/lab.ts";
import { AutolabError } from "../core/errors.ts";
import { viewerFleetUrl } from "../fleet/workers-view.ts";
import { openNotebook } from "../ledger/open-notebook.ts";
import { loadProgram } from "../program/index.ts";
import { startServer } from "../server/serve.ts";
import { safeText } from "./safe-text.ts";

export interface ServeFlags {
  program?: string;
  port: number;
  host: string;
  token?: string;
  fleet?: string;
}

/** The notebook of `--program`; an empty one is made for a project that has not run yet. */
export function notebookPath(program: string | undefined): { ledgerPath: string; stateDir: string } {
  const { file, stateDir, db: ledgerPath } = locateNotebook(program);
  if (!notebookExists(ledgerPath)) {
    if (!existsSync(file)) {
      throw new AutolabError(
        "NO_NOTEBOOK",
        `no lab notebook at ${ledgerPath} (and no program.md at ${file}).`,
        "Run this in the project directory, or pass --program <path to program.md>.",
      );
    }
    prepareStateDir(stateDir);
    openNotebook(ledgerPath).close();
  }
  assertNotEmptied(stateDir);
  return { ledgerPath, stateDir };
}

/** `autolab serve`: the dashboard and API until Ctrl-C. */
export async function serveCommand(flags: ServeFlags): Promise<void> {
  const { ledgerPath, stateDir } = notebookPath(flags.program);
  // The user's own secret is never echoed (terminal scrollback, CI logs): only where it came from.
  const envToken = process.env.AUTOLAB_TOKEN || undefined;
  const token = flags.token ?? envToken;
  const source = flags.token !== undefined ? "--token" : "AUTOLAB_TOKEN";
  let programDb: string | undefined;
  try {
    programDb = loadProgram(programPath(flags.program)).executor?.fleet?.db;
  } catch {
    // no readable program.md: only --fleet or the environment name a fleet
  }
  const fleet = viewerFleetUrl(flags.fleet, programDb);
  const server = await startServer({
    ...(fleet ? { fleet } : {}),
    ledgerPath,
    stateDir,
    port: flags.port,
    host: flags.host,
    ...(token !== undefined ? { token } : {}),
  });
  const lines = [`autolab dashboard: ${server.openUrl}`];
  if (token !== undefined) {
    lines.push(
      `  every request needs the token (from ${source}; not shown): open ${server.url}?token=<token> once, or send Authorization: Bearer <token>`,
    );
  } else {
    // Any process of this machine can reach a loopback port (a researcher too, were it not
    // confined): the token made for this server, in the address above, is the browser's key.
    lines.push(
      "  open this address: its token becomes the browser's session cookie; other clients send Authorization: Bearer <the token in it>",
    );
  }
  lines.push(`  notebook ${ledgerPath} (read-only). Ctrl-C stops.`);
  process.stdout.write(`${safeText(lines.join("\n"))}\n`);
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
