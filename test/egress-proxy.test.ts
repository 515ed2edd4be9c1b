/**
 * The researcher's egress proxy (src/runner/egress-proxy.ts), in process: what it serves and what
 * it refuses, over its unix sockets, as the bridge inside a sandbox would use them; and which
 * endpoints an agent gets (src/agents/cli/egress.ts). The proxy in a real sandbox:
 * test/adversarial/researcher-reach.test.ts.
 */
import { createServer as createHttpServer, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentEndpoints, openEgress } from "../src/agents/cli/egress.ts";
import type { AgentConfig } from "../src/core/types.ts";
import {
  assertReachable,
  type EgressEndpoint,
  endpointOf,
  isPublicAddress,
  startEgressProxy,
} from "../src/runner/egress-proxy.ts";

/** Sends `request` on a unix socket, returns everything answered until the server closes (or 3 s). */
function talk(socket: string, request: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(socket);
    let out = "";
    const done = () => resolve(out);
    s.setTimeout(3000, () => s.destroy());
    s.on("data", (d) => {
      out += d;
      if (/\r\n\r\n[\s\S]*model-ok/.test(out) && request.startsWith("CONNECT")) s.destroy();
    });
    s.on("close", done);
    s.on("error", done);
    s.write(request);
  });
}

const config = (over: Partial<AgentConfig> = {}): AgentConfig => ({
  backend: "pi",
  args: [],
  env: {},
  ...over,
});

describe("the egress proxy", () => {
  let model: Server;
  let other: Server;
  const port = (s: Server) => (s.address() as AddressInfo).port;
  beforeAll(async () => {
    const listen = (text: string) =>
      new Promise<Server>((r) => {
        const s = createHttpServer((_q, res) => res.end(text));
        s.listen(0, "127.0.0.1", () => r(s));
      });
    model = await listen("model-ok");
    other = await listen("NOT-THE-MODEL");
  });
  afterAll(() => {
    model.close();
    other.close();
  });

  it("serves the named endpoint (forward and CONNECT), refuses every other host:port with the reason", async () => {
    const named = endpointOf(`http://127.0.0.1:${port(model)}/v1`, "agent.base_url", true);
    const proxy = await startEgressProxy({ endpoints: [named] });
    try {
      const get = (url: string) =>
        talk(proxy.spec.proxy, `GET ${url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(await get(`http://127.0.0.1:${port(model)}/v1/models`)).toMatch(
        /^HTTP\/1\.1 200[\s\S]*model-ok/,
      );
      const refused = await get(`http://127.0.0.1:${port(other)}/`);
      expect(refused).toMatch(/^HTTP\/1\.1 403/);
      expect(refused).toContain("not a model endpoint program.md names");
      expect(refused).not.toContain("NOT-THE-MODEL");
      // Same host, another port; the name of this machine; CONNECT elsewhere.
      expect(await get(`http://localhost:${port(model)}/`)).toMatch(/^HTTP\/1\.1 403/);
      const tunnel = await talk(
        proxy.spec.proxy,
        `CONNECT 127.0.0.1:${port(model)} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n`,
      );
      expect(tunnel).toMatch(/^HTTP\/1\.1 200 Connection Established[\s\S]*model-ok/);
      expect(await talk(proxy.spec.proxy, `CONNECT 127.0.0.1:${port(other)} HTTP/1.1\r\n\r\n`)).toMatch(
        /^HTTP\/1\.1 403/,
      );
      expect(proxy.refused).toBe(3);
      // The loopback endpoint is also a plain forward at its own port.
      expect(proxy.spec.forwards).toEqual([{ port: port(model), socket: expect.stringMatching(/\.sock$/) }]);
      const forward = proxy.spec.forwards[0]?.socket as string;
      expect(await talk(forward, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).toContain(
        "model-ok",
      );
    } finally {
      await proxy.close();
    }
  });

  it("a vendor endpoint (not named by program.md) never reaches a loopback or private address", async () => {
    // A vendor host whose name resolves to this machine (a poisoned resolver, /etc/hosts): refused.
    const vendor: EgressEndpoint = {
      host: "localhost",
      port: port(model),
      named: false,
      source: "x's default",
    };
    const proxy = await startEgressProxy({ endpoints: [vendor] });
    try {
      const out = await talk(
        proxy.spec.proxy,
        `GET http://localhost:${port(model)}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      );
      expect(out).toMatch(/^HTTP\/1\.1 403/);
      expect(out).toContain("non-public addresses");
      expect(out).not.toContain("model-ok");
    } finally {
      await proxy.close();
    }
    for (const a of [
      "127.0.0.1",
      "10.1.2.3",
      "172.20.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "::1",
      "fd00::1",
      "fe80::1",
      "::ffff:10.0.0.1",
    ]) {
      expect(isPublicAddress(a), a).toBe(false);
    }
    for (const a of ["1.1.1.1", "2606:4700::1111", "8.8.8.8"]) expect(isPublicAddress(a), a).toBe(true);
  });

  it("an endpoint that does not answer is an error that names it and the fix", async () => {
    const closed = createHttpServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", () => r()));
    const p = port(closed);
    await new Promise<void>((r) => closed.close(() => r()));
    await expect(
      assertReachable([endpointOf(`http://127.0.0.1:${p}/v1`, "agent.base_url", true)]),
    ).rejects.toMatchObject({
      code: "EGRESS_ENDPOINT_UNREACHABLE",
      message: expect.stringContaining(`127.0.0.1:${p} (agent.base_url)`),
      hint: expect.stringContaining("agent.base_url"),
    });
  });
});

describe("an agent's egress where it cannot be made", () => {
  it("stops the run with the probe's reason and fix, and never opens the host's network instead", async () => {
    const probe = async () => ({
      ok: false as const,
      reason: "bubblewrap 0.4.1 is too old for the option --clearenv, which autolab's sandbox needs",
      hint: "Upgrade bubblewrap to 0.5.0 or later",
    });
    await expect(
      openEgress({ backend: "pi" }, config({ baseUrl: "http://127.0.0.1:1/v1" }), "/dev/null", probe),
    ).rejects.toMatchObject({
      code: "SANDBOX_EGRESS_UNAVAILABLE",
      message: expect.stringContaining("0.4.1 is too old for the option --clearenv"),
      hint: "Upgrade bubblewrap to 0.5.0 or later",
    });
    // Nothing named: no proxy, no probe (the sandbox simply has no network).
    expect(await openEgress({ backend: "command" }, config(), "/dev/null", probe)).toBeUndefined();
  });
});

describe("an agent's endpoints", () => {
  const preset = { backend: "claude", endpoints: ["https://api.anthropic.com"] };
  it("base_url alone when set (named: a local server may be loopback); else the vendor's (public only)", () => {
    expect(agentEndpoints(preset, config({ baseUrl: "http://127.0.0.1:11434/v1" }), {})).toEqual([
      { host: "127.0.0.1", port: 11434, named: true, source: "agent.base_url" },
    ]);
    expect(agentEndpoints(preset, config(), {})).toEqual([
      { host: "api.anthropic.com", port: 443, named: false, source: "claude's default endpoint" },
    ]);
    // The user's own *_BASE_URL (host environment, agent.env) is named too.
    expect(
      agentEndpoints(preset, config({ env: { OPENAI_BASE_URL: "http://gpu-box:8000/v1" } }), {
        ANTHROPIC_BASE_URL: "http://[::1]:9000",
      }).map((e) => [e.host, e.port, e.named]),
    ).toEqual([
      ["gpu-box", 8000, true],
      ["::1", 9000, true],
      ["api.anthropic.com", 443, false],
    ]);
    // The command backend names nothing: its sandbox has no network at all.
    expect(agentEndpoints({ backend: "command" }, config(), {})).toEqual([]);
  });
});
