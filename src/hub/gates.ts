/**
 * The hub's cheap gates (docs/hub.md "The hub's API"): pieces of the checks every request goes
 * through before anything costs compute, each failing as a `HubError` — a 4xx with a code and a
 * message that names the problem and the fix. The server (server.ts) runs them cheapest first.
 * Nothing here trusts a number a contributor sent: the terms checks only refuse claims the hub
 * could not verify under its own terms (hardware class, budget, seeds, metric, bounds).
 */
import { createHash } from "node:crypto";
import { isIP } from "node:net";
import type { Claim } from "./claim.ts";

export class HubError extends Error {
  readonly status: 400 | 401 | 403 | 404 | 405 | 409 | 413 | 415 | 422 | 429;
  readonly code: string;
  readonly headers: Record<string, string>;
  constructor(
    status: HubError["status"],
    code: string,
    message: string,
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

export function sha256Hex(data: Buffer | string): string {
  return createHash("sha256").update(data).digest("hex");
}

/** The hub's limits and quotas; every one a parameter (HubAppDeps.limits). */
export interface HubLimits {
  /** A signed claim's body, bytes (the claim format's own limit). */
  claimBytes: number;
  /** An uploaded bundle, bytes. */
  bundleBytes: number;
  /** A registration's body, bytes. */
  registerBytes: number;
  /** A claim's createdAt within this many ms of the hub's clock, either side. */
  freshnessMs: number;
  /**
   * Seeds a claim must report at least. Default 1: the claim's own seeds serve only the
   * verifiers' agreement check (the decision is made on fresh seeds the hub draws), and a local
   * run keeps a clear improvement after one or two trials (its noise rule stops early).
   */
  seedsMin: number;
  /** Claims per identity per 24 h. */
  claimsPerDay: number;
  /** Bundle bytes uploaded per identity per 24 h. */
  bundleBytesPerDay: number;
  /** Registrations per address per 24 h. */
  registrationsPerDay: number;
  /** Event feeds (SSE streams) open at once per address. */
  feedsPerAddress: number;
  /** Token bucket per identity over its writes (claims, bundles). */
  identityRate: { capacity: number; refillPerS: number };
  /** Token bucket per client address over every write (registrations, bundles, claims). */
  addressRate: { capacity: number; refillPerS: number };
  /** Sanity bounds per metric name (program.md has no bounds: the operator's, else finite only). */
  bounds: Record<string, { min?: number; max?: number }>;
}

export const DEFAULT_LIMITS: HubLimits = Object.freeze({
  claimBytes: 64 * 1024,
  bundleBytes: 8 * 1024 * 1024,
  registerBytes: 4096,
  freshnessMs: 10 * 60_000,
  seedsMin: 1,
  claimsPerDay: 1000,
  bundleBytesPerDay: 1024 * 1024 * 1024,
  registrationsPerDay: 10,
  feedsPerAddress: 16,
  identityRate: { capacity: 20, refillPerS: 1 },
  addressRate: { capacity: 60, refillPerS: 10 },
  bounds: {},
});

/** The bearer token of an Authorization header, or undefined. */
export function bearer(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer ([A-Za-z0-9_-]{16,128})$/.exec(header.trim());
  return m?.[1];
}

/**
 * The declared Content-Length, checked against `limit` before a byte is read: 413 when over.
 * A malformed header is left to the counting read (Node's parser refuses most of them first).
 */
export function checkDeclaredLength(header: string | undefined, limit: number, what: string): void {
  if (header === undefined) return;
  const n = Number(header);
  if (/^\d+$/.test(header.trim()) && n > limit)
    throw new HubError(413, "too_large", `${what} of ${n} bytes; at most ${limit}`);
}

/** Reads a request body, counting bytes as they come: 413 as soon as it passes `limit`. */
export async function readLimited(req: Request, limit: number, what: string): Promise<Buffer> {
  checkDeclaredLength(req.headers.get("content-length") ?? undefined, limit, what);
  const body = req.body;
  if (!body) return Buffer.alloc(0);
  const reader = body.getReader();
  const chunks: Buffer[] = [];
  let size = 0;
  for (;;) {
    let step: Awaited<ReturnType<typeof reader.read>>;
    try {
      step = await reader.read();
    } catch (err) {
      // The client went away mid-body (or sent a broken chunked encoding).
      throw new HubError(
        400,
        "malformed",
        `${what} could not be read: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const { done, value } = step;
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw new HubError(413, "too_large", `${what} of more than ${limit} bytes; at most ${limit}`);
    }
    chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
  }
  return Buffer.concat(chunks, size);
}

/** JSON of a body already read; 400 `malformed` naming the problem. */
export function parseJson(body: Buffer, what: string): unknown {
  const text = body.toString("utf8");
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new HubError(400, "malformed", `${what} is not JSON: ${(e as Error).message}`);
  }
}

/** The mean of the objective's values over the claim's seeds. */
export function claimedValue(claim: Claim, metric: string): number {
  const values = claim.metrics[metric] ?? [];
  const sum = values.reduce((a, b) => a + b, 0);
  // Σ v overflows for values near the largest double where Σ v/n does not.
  return Number.isFinite(sum) ? sum / values.length : values.reduce((a, b) => a + b / values.length, 0);
}

export interface HubTerms {
  hardwareClass: string;
  budgetS: number;
  seedsMin: number;
  metric: string;
  bounds: HubLimits["bounds"];
}

/** Gate 6: the hub's own terms. Throws the first one the claim breaks. */
export function checkTerms(claim: Claim, t: HubTerms): void {
  if (claim.hardwareClass !== t.hardwareClass)
    throw new HubError(
      422,
      "hardware_class",
      `this hub verifies on hardware class ${JSON.stringify(t.hardwareClass)}, the claim names ${JSON.stringify(claim.hardwareClass)}; run on that class (or join a hub for yours)`,
    );
  if (claim.budgetS !== t.budgetS)
    throw new HubError(
      422,
      "budget",
      `the program's budget is ${t.budgetS} s, the claim's trials ran with ${claim.budgetS} s; run with the program's budget`,
    );
  if (claim.seeds.length < t.seedsMin)
    throw new HubError(
      422,
      "seeds",
      `the claim reports ${claim.seeds.length} seeds; this hub needs at least ${t.seedsMin}`,
    );
  if (!Object.hasOwn(claim.metrics, t.metric))
    throw new HubError(
      422,
      "metric",
      `the claim has no values of the objective ${JSON.stringify(t.metric)} (it has ${Object.keys(
        claim.metrics,
      )
        .map((m) => JSON.stringify(m))
        .join(", ")})`,
    );
  for (const [name, values] of Object.entries(claim.metrics)) {
    const b = Object.hasOwn(t.bounds, name) ? t.bounds[name] : undefined;
    for (const v of values) {
      const bad =
        !Number.isFinite(v) || (b?.min !== undefined && v < b.min) || (b?.max !== undefined && v > b.max);
      if (bad)
        throw new HubError(
          422,
          "bounds",
          `${JSON.stringify(name)} = ${v} is outside the hub's sanity bounds${b ? ` [${b.min ?? "-∞"}, ${b.max ?? "∞"}]` : " (finite numbers)"}`,
        );
    }
  }
}

/** The claimed value, refused when it is not a finite number (values near ±1.8e308 overflow a sum). */
export function checkClaimedValue(value: number, metric: string): void {
  if (!Number.isFinite(value))
    throw new HubError(
      422,
      "bounds",
      `the mean of ${JSON.stringify(metric)} over the claim's seeds is not a finite number`,
    );
}

/** Whether a claimed value would move the frontier past the head's recorded value. */
export function classify(
  value: number,
  headValue: number | null,
  direction: "minimize" | "maximize",
): "frontier" | "finding" {
  if (headValue === null) return "frontier";
  return (direction === "minimize" ? value < headValue : value > headValue) ? "frontier" : "finding";
}

/**
 * The address a client's limits count by: IPv4 as is (an IPv4-mapped IPv6 address as its IPv4),
 * IPv6 by its /64 (one host usually holds a whole /64: counting single addresses would hand out
 * 2^64 of them). Anything else (no socket: an in-process request) is "local".
 */
export function addressKey(raw: string | undefined): string {
  if (!raw) return "local";
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(raw);
  if (mapped?.[1]) return mapped[1];
  const kind = isIP(raw);
  if (kind === 4) return raw;
  if (kind !== 6) return "local";
  const zoneless = raw.split("%")[0] as string;
  const [head = "", tail = ""] = zoneless.split("::");
  const h = head ? head.split(":") : [];
  const t = zoneless.includes("::") ? (tail ? tail.split(":") : []) : [];
  const groups = zoneless.includes("::") ? [...h, ...Array(8 - h.length - t.length).fill("0"), ...t] : h;
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g || "0", 16).toString(16))
    .join(":")}::/64`;
}
