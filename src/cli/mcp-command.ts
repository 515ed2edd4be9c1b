import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createLabMcpServer } from "../mcp/server.ts";
import { onOutputClosed } from "./closed-output.ts";
import { safeText } from "./safe-text.ts";

/** `autolab mcp`: the lab as an MCP server on stdio. Stdout is the protocol; logs go to stderr. */
export async function mcpCommand(flags: { program?: string; tag?: string }): Promise<void> {
  const { server, close } = createLabMcpServer({
    // Its log lines quote hypotheses and reasons: researcher text, made safe for the terminal.
    log: (line) => process.stderr.write(`${safeText(line)}\n`),
    ...(flags.program ? { program: flags.program } : {}),
    ...(flags.tag ? { tag: flags.tag } : {}),
  });
  const transport = new StdioServerTransport();
  const shutdown = async () => {
    await close();
    process.exit(0);
  };
  transport.onclose = () => void shutdown();
  // The client closed its end of stdout: nobody is left to answer.
  onOutputClosed((stream) => stream === "stdout" && void shutdown());
  process.on("SIGINT", () => void shutdown());
  process.on("SIGTERM", () => void shutdown());
  await server.connect(transport);
}
