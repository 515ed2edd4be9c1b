import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createLabMcpServer } from "../mcp/server.ts";

/** `autolab mcp`: the lab as an MCP server on stdio. Stdout is the protocol; logs go to stderr. */
export async function mcpCommand(flags: { program?: string; tag?: string }): Promise<void> {
  const { server, close } = createLabMcpServer({
    ...(flags.program ? { program: flags.program } : {}),
    ...(flags.tag ? { tag: flags.tag } : {}),
  });
  const transport = new StdioServerTransport();
  const shutdown = async () => {
    await close();
    process.exit(0);
  };
  transport.onclose = () => void shutdown();
  process.on("SIGINT", () => void shutdown());
  process.on("SIGTERM", () => void shutdown());
  await server.connect(transport);
}
