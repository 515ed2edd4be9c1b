/**
 * Signed claims (src/hub/claim.ts) and identities (src/hub/identity.ts): the attacks first —
 * forged and foreign signatures, claims altered after signing, replays, encoding games,
 * oversized and non-finite input, malformed keys — then the honest path.
 */
import { createHash, createPublicKey, randomBytes, sign, verify } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalize } from "../src/hub/canonical-json.ts";
import {
  CLAIM_DOMAIN,
  CLAIM_LIMITS,
  type Claim,
  type ClaimCheck,
  claimId,
  claimMessage,
  freshness,
  parseSignedClaim,
  signClaim,
  verifyClaim,
} from "../src/hub/claim.ts";
import {
  decodeBase64url,
  generateIdentity,
  keyIdOf,
  parsePublicKey,
  rawPublicKey,
} from "../src/hub/identity.ts";

const alice = generateIdentity();
const mallory = generateIdentity();

function claimBy(who: { keyId: string }, over: Partial<Claim> = {}): Claim {
  return {
    parent: "a".repeat(40),
    bundleSha256: "b".repeat(64),
    harnessVersion: "0.9.0",
    hardwareClass: "h100-80g",
    budgetS: 300,
    seeds: [1, 2, 3],
    metrics: { val_bpb: [0.991, 0.987, 0.993], tokens_per_s: [1200, 1210.5, 1190] },
    logSha256: "c".repeat(64),
    contributor: who.keyId,
    nonce: randomBytes(16).toString("base64url"),
    createdAt: "2026-11-25T09:30:00.000Z",
    ...over,
  };
}

/** What arrives at the hub: the signed claim as JSON text, parsed again. */
function overTheWire(signed: unknown): unknown {
  const parsed = parseSignedClaim(JSON.stringify(signed));
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.value;
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/** base64url text that Buffer decodes to the same bytes: the last character's unused low bits set. */
function sameBytesOtherText(text: string): string {
  const other = `${text.slice(0, -1)}${ALPHABET[ALPHABET.indexOf(text.slice(-1)) + 1]}`;
  expect(Buffer.from(other, "base64url").equals(Buffer.from(text, "base64url"))).toBe(true);
  return other;
}

function reason(check: ClaimCheck): string {
  return check.ok ? "ok" : check.reason;
}

/** Signs arbitrary bytes as a claim signature would be made, bypassing signClaim's own check. */
function rawSign(claim: unknown, privateKey = alice.privateKey): string {
  return sign(
    null,
    Buffer.concat([Buffer.from(CLAIM_DOMAIN), Buffer.from(canonicalize(claim))]),
    privateKey,
  ).toString("base64url");
}

describe("claims: forged and foreign signatures", () => {
  it("a forged signature (random bytes of the right length) is bad_signature", () => {
    const signed = { claim: claimBy(alice), signature: randomBytes(64).toString("base64url") };
    expect(reason(verifyClaim(overTheWire(signed), alice.publicKey))).toBe("bad_signature");
  });

  it("a signature by another key over a claim naming alice is bad_signature", () => {
    const claim = claimBy(alice);
    const signed = { claim, signature: rawSign(claim, mallory.privateKey) };
    expect(reason(verifyClaim(overTheWire(signed), alice.publicKey))).toBe("bad_signature");
  });

  it("mallory's valid claim checked against alice's key is wrong_key, naming both ids", () => {
    const signed = signClaim(claimBy(mallory), mallory.privateKey);
    const check = verifyClaim(overTheWire(signed), alice.publicKey);
    expect(check).toEqual({ ok: false, reason: "wrong_key", claimed: mallory.keyId, key: alice.keyId });
  });

  it("mallory naming alice as contributor and signing with her own key fails against alice's key", () => {
    const claim = claimBy(alice);
    const signed = signClaim(claim, mallory.privateKey);
    expect(reason(verifyClaim(overTheWire(signed), alice.publicKey))).toBe("bad_signature");
  });

  it("a signature over the claim without the domain prefix does not verify", () => {
    const claim = claimBy(alice);
    const signature = sign(null, Buffer.from(canonicalize(claim)), alice.privateKey).toString("base64url");
    expect(reason(verifyClaim(overTheWire({ claim, signature }), alice.publicKey))).toBe("bad_signature");
  });

  it("signatures that are not 64 bytes of canonical base64url are bad_signature, not a throw", () => {
    const good = signClaim(claimBy(alice), alice.privateKey);
    for (const signature of [
      "",
      "!!!!",
      good.signature.slice(0, -1),
      `${good.signature}A`,
      `${good.signature.slice(0, -1)}=`,
      Buffer.from(good.signature, "base64url").toString("base64"), // + and / instead of - and _
      sameBytesOtherText(good.signature), // decodes to the same 64 bytes
    ]) {
      const check = verifyClaim(overTheWire({ claim: good.claim, signature }), alice.publicKey);
      expect(reason(check), signature).toMatch(/bad_signature|malformed/);
    }
  });
});

describe("claims: altered after signing", () => {
  const original = signClaim(claimBy(alice), alice.privateKey);
  const altered: Record<keyof Claim, unknown> = {
    parent: "d".repeat(40),
    bundleSha256: "e".repeat(64),
    harnessVersion: "0.9.1",
    hardwareClass: "a100-40g",
    budgetS: 301,
    seeds: [1, 2, 4],
    metrics: { val_bpb: [0.891, 0.987, 0.993], tokens_per_s: [1200, 1210.5, 1190] },
    logSha256: "f".repeat(64),
    contributor: mallory.keyId,
    nonce: randomBytes(16).toString("base64url"),
    createdAt: "2026-11-25T09:30:00.001Z",
  };

  it("covers every field of the claim", () => {
    expect(Object.keys(altered).sort()).toEqual(Object.keys(original.claim).sort());
  });

  it.each(Object.keys(altered) as (keyof Claim)[])("changing %s breaks the signature", (field) => {
    const signed = { claim: { ...original.claim, [field]: altered[field] }, signature: original.signature };
    const expected = field === "contributor" ? "wrong_key" : "bad_signature";
    expect(reason(verifyClaim(overTheWire(signed), alice.publicKey))).toBe(expected);
    // Under mallory's key the altered contributor is hers, and the signature is still alice's.
    if (field === "contributor")
      expect(reason(verifyClaim(overTheWire(signed), mallory.publicKey))).toBe("bad_signature");
  });

  it("adding a field is malformed (a signed claim holds nothing unsigned or unknown)", () => {
    for (const signed of [
      { ...original, claim: { ...original.claim, verified: true } },
      { ...original, trusted: true },
    ])
      expect(reason(verifyClaim(overTheWire(signed), alice.publicKey))).toBe("malformed");
  });

  it("the untouched claim still verifies (the alterations are what fails)", () => {
    expect(reason(verifyClaim(overTheWire(original), alice.publicKey))).toBe("ok");
  });
});

describe("claims: replays and encoding games", () => {
  const signed = signClaim(claimBy(alice), alice.privateKey);

  it("a replayed claim verifies again with the same claimId: the hub's uniqueness on it refuses the replay", () => {
    const first = verifyClaim(overTheWire(signed), alice.publicKey);
    const replay = verifyClaim(overTheWire(structuredClone(signed)), alice.publicKey);
    expect(first.ok && replay.ok && first.claimId === replay.claimId).toBe(true);
  });

  it("re-encoding a claim (key order, whitespace, 1.0 vs 1, 1e2 vs 100) neither breaks it nor changes its id", () => {
    const c = signed.claim;
    // The same claim written by hand in another order, with spaces and other number spellings.
    const text = `{ "signature" : "${signed.signature}",
      "claim" : {
        "createdAt": "${c.createdAt}", "nonce": "${c.nonce}", "contributor": "${c.contributor}",
        "logSha256": "${c.logSha256}",
        "metrics": { "tokens_per_s": [1.2e3, 1210.50, 1190.0], "val_bpb": [9.91e-1, 0.9870, 993e-3] },
        "seeds": [1.0, 2, 3e0], "budgetS": 3e2, "hardwareClass": "${c.hardwareClass}",
        "harnessVersion": "${c.harnessVersion}", "bundleSha256": "${c.bundleSha256}", "parent": "${c.parent}" } }`;
    const parsed = parseSignedClaim(text);
    expect(parsed.ok).toBe(true);
    const check = verifyClaim(parsed.ok ? parsed.value : null, alice.publicKey);
    expect(check.ok && check.claimId).toBe(claimId(signed));
  });

  it("a fresh nonce makes a new claimId (a new claim, not a replay)", () => {
    const again = signClaim(
      { ...signed.claim, nonce: randomBytes(16).toString("base64url") },
      alice.privateKey,
    );
    expect(claimId(again)).not.toBe(claimId(signed));
  });

  it("claimId is sha256 of the domain line and the canonical claim", () => {
    expect(claimId(signed)).toBe(createHash("sha256").update(claimMessage(signed.claim)).digest("hex"));
    expect(claimMessage(signed.claim).toString("utf8")).toBe(
      `autolab-claim-v1\n${canonicalize(signed.claim)}`,
    );
  });

  it("a time spelled another way (no milliseconds, an offset) is malformed: one spelling per instant", () => {
    for (const createdAt of [
      "2026-11-25T09:30:00Z",
      "2026-11-25T10:30:00.000+01:00",
      "2026-02-30T09:30:00.000Z",
    ]) {
      const claim = { ...signed.claim, createdAt };
      const check = verifyClaim(overTheWire({ claim, signature: rawSign(claim) }), alice.publicKey);
      expect(reason(check), createdAt).toBe("malformed");
    }
  });
});

describe("claims: size and value limits, before any crypto", () => {
  /** A claim with one field replaced, signed correctly over its bytes: only the schema can refuse it. */
  function validlySigned(over: Record<string, unknown>): unknown {
    const claim: Record<string, unknown> = { ...claimBy(alice), ...over };
    for (const [k, v] of Object.entries(over)) if (v === undefined) delete claim[k];
    return { claim, signature: rawSign(claim) };
  }

  const oversized: [string, Record<string, unknown>][] = [
    ["harnessVersion", { harnessVersion: "9".repeat(CLAIM_LIMITS.label + 1) }],
    ["hardwareClass", { hardwareClass: "h".repeat(10_000) }],
    ["nonce", { nonce: "n".repeat(65) }],
    ["parent", { parent: "a".repeat(41) }],
    [
      "seeds",
      {
        seeds: Array.from({ length: CLAIM_LIMITS.seeds + 1 }, (_, i) => i),
        metrics: { loss: Array.from({ length: CLAIM_LIMITS.seeds + 1 }, () => 1) },
      },
    ],
    ["metrics", { metrics: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`m${i}`, [1, 2, 3]])) }],
    ["a metric name", { metrics: { ["m".repeat(65)]: [1, 2, 3] } }],
    ["budgetS", { budgetS: CLAIM_LIMITS.budgetS + 1 }],
  ];

  it.each(oversized)("an oversized %s is malformed even with a valid signature", (_what, over) => {
    const check = verifyClaim(overTheWire(validlySigned(over)), alice.publicKey);
    expect(reason(check)).toBe("malformed");
  });

  it("the schema is checked before the signature: a huge field with a garbage signature is malformed, not bad_signature", () => {
    const signed = { claim: claimBy(alice, { harnessVersion: "x".repeat(100_000) }), signature: "garbage" };
    const check = verifyClaim(signed, alice.publicKey);
    expect(check.ok === false && check.reason === "malformed" && check.issues.map((i) => i.path)).toEqual([
      "claim.harnessVersion",
    ]);
  });

  it("a body over the byte limit is refused before JSON.parse", () => {
    const body = JSON.stringify({ claim: claimBy(alice), signature: "x".repeat(CLAIM_LIMITS.bytes) });
    const parsed = parseSignedClaim(body);
    expect(parsed.ok === false && parsed.issues[0]?.path).toBe("(body)");
    expect(parseSignedClaim("{not json").ok).toBe(false);
  });

  it.each([
    ["NaN", Number.NaN],
    ["Infinity", Number.POSITIVE_INFINITY],
    ["-Infinity", Number.NEGATIVE_INFINITY],
  ])("a %s metric is malformed, and signClaim refuses to sign it", (_what, bad) => {
    const claim = claimBy(alice, { metrics: { val_bpb: [0.99, bad, 0.98] } });
    // JSON cannot carry NaN (it arrives as null); an in-process caller can: both are refused.
    expect(reason(verifyClaim({ claim, signature: "x" }, alice.publicKey))).toBe("malformed");
    expect(reason(verifyClaim(overTheWire({ claim, signature: "x" }), alice.publicKey))).toBe("malformed");
    expect(() => signClaim(claim, alice.privateKey)).toThrow(/metrics\.val_bpb/);
  });

  it.each([
    ["seeds and values of different lengths", { metrics: { loss: [1, 2] } }],
    ["a repeated seed", { seeds: [1, 1, 2] }],
    ["no seed", { seeds: [], metrics: { loss: [] } }],
    ["a fractional seed", { seeds: [1.5, 2, 3] }],
    ["no metric", { metrics: {} }],
    ["a short commit", { parent: "abc123" }],
    ["an upper-case hash", { bundleSha256: "B".repeat(64) }],
    ["a hardware class with spaces", { hardwareClass: "h100 80g" }],
    ["a negative budget", { budgetS: -1 }],
    ["a short nonce", { nonce: "abc" }],
    ["a missing field", { logSha256: undefined }],
    ["a string where a number goes", { budgetS: "300" }],
  ])("%s is malformed", (_what, over) => {
    expect(reason(verifyClaim(overTheWire(validlySigned(over)), alice.publicKey))).toBe("malformed");
  });

  it("a __proto__ metric (an own key after JSON.parse) is refused, never ok and never a throw", () => {
    // zod's record leaves the key out, so what the hub checks is not what was signed.
    const signed = validlySigned({ metrics: JSON.parse('{"loss": [1, 2, 3], "__proto__": [1, 2, 3]}') });
    expect(reason(verifyClaim(overTheWire(signed), alice.publicKey))).toMatch(/malformed|bad_signature/);
  });

  it.each([null, "claim", 42, [], {}, { claim: null, signature: "x" }])(
    "%j is malformed, not a throw",
    (body) => {
      expect(reason(verifyClaim(body, alice.publicKey))).toBe("malformed");
    },
  );
});

describe("identities: keys", () => {
  it("public keys are 43 base64url characters of the raw 32 bytes; the key id is their whole sha256", () => {
    expect(alice.publicKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const raw = Buffer.from(alice.publicKey, "base64url");
    expect(alice.keyId).toBe(createHash("sha256").update(raw).digest("hex"));
    expect(alice.keyId).toHaveLength(64);
    const parsed = parsePublicKey(alice.publicKey);
    expect(parsed.ok && rawPublicKey(parsed.value.key).equals(raw)).toBe(true);
    expect(parsed.ok && parsed.value.keyId).toBe(keyIdOf(raw));
    expect(alice.keyId).not.toBe(mallory.keyId);
  });

  it.each([
    ["empty", ""],
    ["too short", "abc"],
    ["too long", `${"A".repeat(43)}A`],
    ["padded", `${"A".repeat(42)}=`],
    ["standard base64 alphabet", `${"A".repeat(42)}+`],
    ["a stray character", `${"A".repeat(42)}.`],
    ["non-canonical last character", sameBytesOtherText(generateIdentity().publicKey)],
    ["not a string", 42],
    ["null", null],
    ["an object", { key: "x" }],
    ["a PEM key", "-----BEGIN PUBLIC KEY-----"],
  ])("a malformed key (%s) is refused with a reason, never thrown", (_what, key) => {
    const parsed = parsePublicKey(key);
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? "" : parsed.reason).toMatch(/public key/);
    const check = verifyClaim(overTheWire(signClaim(claimBy(alice), alice.privateKey)), key as string);
    expect(check.ok === false && check.reason === "malformed" && check.issues[0]?.path).toBe("publicKey");
  });

  it("32 bytes that are not a point on the curve verify nothing and throw nothing", () => {
    // y = 2^255 - 1 (all ones but the sign bit) is not a canonical field element.
    const notAPoint = Buffer.alloc(32, 0xff);
    notAPoint[31] = 0x7f;
    const text = notAPoint.toString("base64url");
    const parsed = parsePublicKey(text);
    const claim = claimBy({ keyId: keyIdOf(notAPoint) });
    const check = verifyClaim(overTheWire({ claim, signature: rawSign(claim) }), text);
    expect(parsed.ok ? reason(check) : "refused").toMatch(/bad_signature|refused/);
  });

  const smallOrder = [
    "0100000000000000000000000000000000000000000000000000000000000000", // the identity
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
    "0000000000000000000000000000000000000000000000000000000000000000", // order 4
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
  ];

  it.each(smallOrder)("a small-order point (%s) is refused as a key", (hex) => {
    const parsed = parsePublicKey(Buffer.from(hex, "hex").toString("base64url"));
    expect(parsed.ok ? "accepted" : parsed.reason).toMatch(/small order/);
  });

  it.each(smallOrder)("OpenSSL verifies no all-purpose signature (R = identity, S = 0) under %s", (hex) => {
    // Under the identity key [S]B = R + [k]A holds for every message with R = identity, S = 0;
    // under an order-8 key for one message in eight. 64 messages: none may verify.
    const key = createPublicKey({
      key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), Buffer.from(hex, "hex")]),
      format: "der",
      type: "spki",
    });
    const signature = Buffer.concat([Buffer.from(smallOrder[0] as string, "hex"), Buffer.alloc(32)]);
    const verified = Array.from({ length: 64 }, (_, i) =>
      verify(null, Buffer.from(`claim ${i}`), key, signature),
    );
    expect(verified.filter(Boolean)).toHaveLength(0);
  });

  it("decodeBase64url checks length, alphabet and the canonical spelling", () => {
    const bytes = randomBytes(32);
    const text = bytes.toString("base64url");
    const ok = decodeBase64url(text, 32, "x");
    expect(ok.ok && ok.value.equals(bytes)).toBe(true);
    expect(decodeBase64url(text, 64, "x").ok).toBe(false);
  });
});

describe("claims: the honest path", () => {
  it("sign → JSON → verify gives the claim and its id", () => {
    const claim = claimBy(alice);
    const signed = signClaim(claim, alice.privateKey);
    const check = verifyClaim(overTheWire(signed), alice.publicKey);
    expect(check).toEqual({ ok: true, claim, claimId: claimId(signed) });
  });

  it("a SHA-256 repository's 64-digit commit id is a valid parent", () => {
    const signed = signClaim(claimBy(alice, { parent: "0".repeat(64) }), alice.privateKey);
    expect(reason(verifyClaim(overTheWire(signed), alice.publicKey))).toBe("ok");
  });
});

describe("freshness: the created-at window", () => {
  const t = Date.parse("2026-11-25T09:30:00.000Z");
  const window = 10 * 60_000;

  it("inside the window on either side, and at its edges, is fresh", () => {
    for (const now of [t, t + window, t - window, t + 1])
      expect(freshness("2026-11-25T09:30:00.000Z", now, window)).toEqual({ ok: true });
  });

  it("older than the window is too_old, further ahead than the window is in_future, by how much", () => {
    expect(freshness(t, t + window + 5, window)).toEqual({ ok: false, reason: "too_old", byMs: 5 });
    expect(freshness(t, t - window - 7, window)).toEqual({ ok: false, reason: "in_future", byMs: 7 });
  });

  it("an unreadable time is not fresh", () => {
    expect(freshness("yesterday", t, window).ok).toBe(false);
  });
});
