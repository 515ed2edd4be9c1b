/**
 * A sandboxed agent CLI's network (docs/security.md "5. The researcher gets only what it needs"):
 * the model endpoints the program names, served by an egress proxy the harness runs for one
 * proposal, and nothing else — no other host, no LAN, no loopback service but a named local
 * model server.
 */
import { AutolabError } from "../../core/errors.ts";
import type { AgentConfig } from "../../core/types.ts";
import { probeEgress } from "../../runner/egress-probe.ts";
import {
  assertReachable,
  type EgressEndpoint,
  type EgressProxy,
  endpointOf,
  startEgressProxy,
} from "../../runner/egress-proxy.ts";
import type { SandboxProbe } from "../../runner/sandbox.ts";
import type { CliPreset } from "./preset.ts";

const isUrl = (v: string) => /^https?:\/\//i.test(v);

/**
 * The endpoints: `agent.base_url` when set (with any `*_BASE_URL` of `agent.env`: all named by
 * program.md, so a loopback or LAN address is allowed); otherwise the preset's vendor endpoints
 * (public addresses only) and the `*_BASE_URL` variables of the harness's environment that
 * reach the CLI (agentEnv passes them: the user's own choice of endpoint).
 */
export function agentEndpoints(
  preset: Pick<CliPreset, "backend" | "endpoints">,
  config: AgentConfig,
  host: NodeJS.ProcessEnv = process.env,
): EgressEndpoint[] {
  const out: EgressEndpoint[] = [];
  const add = (url: string, source: string, named: boolean) => {
    let ep: EgressEndpoint;
    try {
      ep = endpointOf(url, source, named);
    } catch {
      return;
    }
    const same = out.find((e) => e.host === ep.host && e.port === ep.port);
    if (same) same.named ||= named;
    else out.push(ep);
  };
  for (const [k, v] of Object.entries(config.env)) {
    if (k.endsWith("_BASE_URL") && isUrl(v)) add(v, `agent.env ${k}`, true);
  }
  if (config.baseUrl) {
    add(config.baseUrl, "agent.base_url", true);
    return out;
  }
  for (const [k, v] of Object.entries(host)) {
    if (v && k.endsWith("_BASE_URL") && k in config.env === false && isUrl(v)) add(v, `$${k}`, true);
  }
  for (const url of preset.endpoints ?? []) add(url, `${preset.backend}'s default endpoint`, false);
  return out;
}

/**
 * The proxy for one sandboxed proposal; undefined when the CLI names no endpoint (its sandbox
 * then has no network at all). Throws an AutolabError, and the run stops, where the egress
 * cannot be made here (bubblewrap too old, no network namespace) or no endpoint answers: a
 * researcher never runs with the host's network instead.
 */
export async function openEgress(
  preset: Pick<CliPreset, "backend" | "endpoints">,
  config: AgentConfig,
  log: string,
  /** Whether the egress works here (tests give their own). */
  probeFn: () => Promise<SandboxProbe> = () => probeEgress(),
): Promise<EgressProxy | undefined> {
  const endpoints = agentEndpoints(preset, config);
  if (endpoints.length === 0) return undefined;
  const probe = await probeFn();
  if (!probe.ok) {
    throw new AutolabError(
      "SANDBOX_EGRESS_UNAVAILABLE",
      `the researcher's sandbox reaches its model endpoints only through autolab's egress proxy, which cannot be set up here: ${probe.reason}.`,
      probe.hint,
    );
  }
  // Named endpoints must all answer; of a vendor's defaults, one is enough.
  const named = endpoints.filter((e) => e.named);
  const vendor = endpoints.filter((e) => !e.named);
  await assertReachable(named);
  if (vendor.length > 0) {
    let first: unknown;
    let ok = false;
    for (const ep of vendor) {
      try {
        await assertReachable([ep]);
        ok = true;
        break;
      } catch (err) {
        first ??= err;
      }
    }
    if (!ok) throw first;
  }
  return startEgressProxy({ endpoints, log });
}
