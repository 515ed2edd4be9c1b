/**
 * A signed claim (issue #14): "from parent commit P, the bundle with this sha256, run by this
 * harness version on this hardware class with this budget and these seeds, measured these
 * metrics per seed and wrote the log with this sha256" — named by the contributor's key id,
 * with a nonce and a creation time, signed with the contributor's Ed25519 key.
 *
 * The signature covers `CLAIM_DOMAIN` followed by the claim's canonical JSON (RFC 8785,
 * canonical-json.ts): re-serializing a claim (key order, whitespace, `1.0` vs `1`) changes
 * nothing, and the prefix keeps a claim signature from ever being valid for anything else the
 * same key might sign later (or a later claim format). Checking runs cheapest first: size and
 * shape (zod, `SignedClaimSchema`) before any crypto, then the key, then the signature.
 *
 * Replay protection is the hub's, with two pure pieces from here: `claimId` (sha256 of the
 * signed bytes: the hub keeps it unique, so the same claim counts once however it is
 * re-encoded) and `freshness` (a created-at window, so the hub need remember nonces only that
 * long). Nothing here trusts a number in a claim: that is the verifiers' job (docs/hub.md).
 */
import { createHash, type KeyObject, sign, verify } from "node:crypto";
import { z } from "zod";
import { METRIC_NAME } from "../trust/constraints.ts";
import { canonicalBytes } from "./canonical-json.ts";
import {
  type Decoded,
  decodeBase64url,
  type PublicKey,
  parsePublicKey,
  SIGNATURE_BYTES,
} from "./identity.ts";

/** The signed bytes start with this: the claim format's name and version. */
export const CLAIM_DOMAIN = "autolab-claim-v1\n";

/** Limits: a claim is small; anything bigger is refused before it is parsed or verified. */
export const CLAIM_LIMITS = {
  /** The whole signed claim as JSON text, in bytes. */
  bytes: 64 * 1024,
  seeds: 64,
  metrics: 16,
  /** Harness version, hardware class, metric names. */
  label: 64,
  /** A trial's budget, seconds (a week). */
  budgetS: 7 * 24 * 3600,
} as const;

const hex = (n: number, what: string) =>
  z.string().regex(new RegExp(`^[0-9a-f]{${n}}$`), { error: `must be ${what}: ${n} lower-case hex digits` });
const sha256 = hex(64, "a sha256");
/** A git object id: SHA-1 (40 hex digits) or SHA-256 (64) repositories. */
const commit = z.string().regex(/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/, {
  error: "must be a full commit id: 40 or 64 lower-case hex digits",
});
const label = z
  .string()
  .min(1)
  .max(CLAIM_LIMITS.label)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:+-]*$/, { error: "use letters, digits and . _ : + - only" });
/** A finite number (zod 4 refuses ±Infinity and NaN already; said once more on purpose). */
const finite = z.number().refine(Number.isFinite, { error: "must be a finite number" });
const metricName = z.string().max(CLAIM_LIMITS.label).regex(METRIC_NAME, { error: "is not a metric name" });
/** ISO 8601 in UTC as Date.prototype.toISOString writes it: one spelling per instant. */
const isoTime = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, {
    error: "must be a UTC time like 2026-11-25T09:30:00.000Z",
  })
  .refine((s) => !Number.isNaN(Date.parse(s)) && new Date(s).toISOString() === s, {
    error: "is not a real time",
  });

export const ClaimSchema = z
  .strictObject({
    /** The commit the candidate builds on. */
    parent: commit,
    /** sha256 of the git bundle holding the candidate commit(s) after `parent`. */
    bundleSha256: sha256,
    harnessVersion: label,
    hardwareClass: label,
    /** A trial's time budget in seconds. */
    budgetS: finite.positive().max(CLAIM_LIMITS.budgetS),
    seeds: z
      .array(z.number().int().min(0).max(0xffffffff))
      .min(1)
      .max(CLAIM_LIMITS.seeds)
      .refine((s) => new Set(s).size === s.length, { error: "must not repeat a seed" }),
    /** One value per seed, in the order of `seeds`. */
    metrics: z
      .record(metricName, z.array(finite).max(CLAIM_LIMITS.seeds))
      .refine((m) => Object.keys(m).length >= 1 && Object.keys(m).length <= CLAIM_LIMITS.metrics, {
        error: `must name 1 to ${CLAIM_LIMITS.metrics} metrics`,
      }),
    /** sha256 of the trials' logs, as the harness wrote them. */
    logSha256: sha256,
    /** The contributor's key id (identity.ts: sha256 hex of the raw public key). */
    contributor: sha256,
    /** At least 128 random bits, base64url. */
    nonce: z
      .string()
      .min(22)
      .max(64)
      .regex(/^[A-Za-z0-9_-]+$/, { error: "must be base64url" }),
    createdAt: isoTime,
  })
  .superRefine((c, ctx) => {
    for (const [name, values] of Object.entries(c.metrics))
      if (values.length !== c.seeds.length)
        ctx.addIssue({
          code: "custom",
          path: ["metrics", name],
          message: `has ${values.length} values for ${c.seeds.length} seeds`,
        });
  });

export type Claim = z.infer<typeof ClaimSchema>;

export const SignedClaimSchema = z.strictObject({
  claim: ClaimSchema,
  /** base64url of the 64-byte Ed25519 signature over `claimMessage(claim)`. */
  signature: z.string().max(128),
});

export interface SignedClaim {
  claim: Claim;
  signature: string;
}

export interface ClaimIssue {
  path: string;
  message: string;
}

export type ClaimCheck =
  | { ok: true; claim: Claim; claimId: string }
  | { ok: false; reason: "malformed"; issues: ClaimIssue[] }
  | { ok: false; reason: "wrong_key"; claimed: string; key: string }
  | { ok: false; reason: "bad_signature"; message: string };

/** The bytes a claim's signature covers: the domain line and the canonical JSON. */
export function claimMessage(claim: Claim): Buffer {
  return Buffer.concat([Buffer.from(CLAIM_DOMAIN, "utf8"), canonicalBytes(claim)]);
}

/** sha256 hex of the signed bytes: the same claim, however encoded, has one id. */
export function claimId(signed: { claim: Claim }): string {
  return createHash("sha256").update(claimMessage(signed.claim)).digest("hex");
}

function issuesOf(error: z.ZodError): ClaimIssue[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join(".") || "(claim)", message: i.message }));
}

/**
 * Signs a claim with the contributor's private key. The claim is checked against the schema
 * first (a contributor should never send what the hub will refuse); throws a TypeError naming
 * the problems when it does not fit, since that is the caller's bug.
 */
export function signClaim(claim: Claim, privateKey: KeyObject): SignedClaim {
  const parsed = ClaimSchema.safeParse(claim);
  if (!parsed.success)
    throw new TypeError(
      `not a valid claim: ${issuesOf(parsed.error)
        .map((i) => `${i.path}: ${i.message}`)
        .join("; ")}`,
    );
  return {
    claim: parsed.data,
    signature: sign(null, claimMessage(parsed.data), privateKey).toString("base64url"),
  };
}

/**
 * Checks a signed claim received from outside against the public key registered for its
 * sender (base64url, identity.ts; `verifyClaimWithKey`: that key already parsed). Never
 * throws. Order: shape and size (no crypto on a malformed or oversized claim), the key
 * (malformed → `malformed`; another identity's key → `wrong_key`), the signature's encoding,
 * then Ed25519. The canonical bytes are made once: the signature is checked over them and the
 * claim id is their sha256.
 */
export function verifyClaim(signed: unknown, publicKey: string): ClaimCheck {
  return check(signed, () => parsePublicKey(publicKey));
}

/** verifyClaim with the registered key parsed already (the hub keeps it parsed for its identities). */
export function verifyClaimWithKey(signed: unknown, publicKey: PublicKey): ClaimCheck {
  return check(signed, () => ({ ok: true, value: publicKey }));
}

function check(signed: unknown, keyOf: () => Decoded<PublicKey>): ClaimCheck {
  const parsed = SignedClaimSchema.safeParse(signed);
  if (!parsed.success) return { ok: false, reason: "malformed", issues: issuesOf(parsed.error) };
  const { claim, signature } = parsed.data;
  const key = keyOf();
  if (!key.ok)
    return { ok: false, reason: "malformed", issues: [{ path: "publicKey", message: key.reason }] };
  if (key.value.keyId !== claim.contributor)
    return { ok: false, reason: "wrong_key", claimed: claim.contributor, key: key.value.keyId };
  const sig = decodeBase64url(signature, SIGNATURE_BYTES, "the signature");
  if (!sig.ok) return { ok: false, reason: "bad_signature", message: sig.reason };
  const message = claimMessage(claim);
  let valid = false;
  try {
    valid = verify(null, message, key.value.key, sig.value);
  } catch {
    valid = false;
  }
  if (!valid)
    return { ok: false, reason: "bad_signature", message: "the signature does not match the claim and key" };
  return { ok: true, claim, claimId: createHash("sha256").update(message).digest("hex") };
}

/**
 * Parses a signed claim from the request body's text, refusing one over `CLAIM_LIMITS.bytes`
 * before JSON.parse sees it. Never throws.
 */
export function parseSignedClaim(
  text: string,
): { ok: true; value: unknown } | { ok: false; issues: ClaimIssue[] } {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > CLAIM_LIMITS.bytes)
    return {
      ok: false,
      issues: [{ path: "(body)", message: `${bytes} bytes; at most ${CLAIM_LIMITS.bytes}` }],
    };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, issues: [{ path: "(body)", message: `not JSON: ${(e as Error).message}` }] };
  }
}

export type Freshness = { ok: true } | { ok: false; reason: "too_old" | "in_future"; byMs: number };

/**
 * Whether a claim created at `createdAt` (ISO time or ms) is within `windowMs` of `now`, on
 * either side (the window absorbs clock skew too). The hub refuses stale claims, so it need
 * remember nonces for `windowMs` only; `claimId` stays unique forever.
 */
export function freshness(createdAt: string | number, now: number, windowMs: number): Freshness {
  const t = typeof createdAt === "number" ? createdAt : Date.parse(createdAt);
  if (!Number.isFinite(t)) return { ok: false, reason: "too_old", byMs: Number.POSITIVE_INFINITY };
  if (now - t > windowMs) return { ok: false, reason: "too_old", byMs: now - t - windowMs };
  if (t - now > windowMs) return { ok: false, reason: "in_future", byMs: t - now - windowMs };
  return { ok: true };
}
