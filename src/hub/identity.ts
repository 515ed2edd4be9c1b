/**
 * A contributor's identity on the hub: an Ed25519 key pair (node:crypto, no dependency). The
 * public key travels as base64url (RFC 4648 §5, no padding) of its raw 32 bytes — 43
 * characters — and is named by its key id, the sha256 of those 32 bytes in hex.
 *
 * The key id is the whole sha256 (64 hex characters), not a prefix: it names the identity in
 * every claim, in the hub's tables and on its leaderboard, so two keys must never share one;
 * 256 bits cost 32 bytes more than 128 and leave no birthday argument to make. It matches how
 * autolab names bundles and logs (sha256 hex, src/fleet/bundles.ts).
 *
 * Whatever arrives from outside (a key to register, a signature) is checked with a typed
 * result and never throws: the hub answers bad input with a 4xx, never a 5xx.
 */
import { createHash, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";

/** SPKI DER of an Ed25519 public key is this 12-byte header followed by the raw 32 bytes (RFC 8410 §4). */
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
export const PUBLIC_KEY_BYTES = 32;
export const SIGNATURE_BYTES = 64;

export interface Identity {
  /** base64url of the raw 32-byte public key: what the contributor registers. */
  publicKey: string;
  /** sha256 hex of the raw public key. */
  keyId: string;
  privateKey: KeyObject;
}

export function generateIdentity(): Identity {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = rawPublicKey(publicKey);
  return { publicKey: raw.toString("base64url"), keyId: keyIdOf(raw), privateKey };
}

/** The raw 32 bytes of an Ed25519 public key object (SPKI DER without its header). */
export function rawPublicKey(key: KeyObject): Buffer {
  const der = key.export({ format: "der", type: "spki" });
  if (key.asymmetricKeyType !== "ed25519" || !der.subarray(0, 12).equals(ED25519_SPKI_PREFIX))
    throw new TypeError("not an Ed25519 public key");
  return der.subarray(ED25519_SPKI_PREFIX.length);
}

/** The key id of a raw public key: sha256, hex, whole. */
export function keyIdOf(raw: Buffer): string {
  return createHash("sha256").update(raw).digest("hex");
}

export type Decoded<T> = { ok: true; value: T } | { ok: false; reason: string };

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/**
 * Strict base64url of exactly `bytes` bytes: the alphabet of RFC 4648 §5, no padding, and the
 * one canonical spelling (Node's decoder ignores stray characters and the low bits of the last
 * one; two texts for the same bytes would be two claims and two key ids for one thing).
 */
export function decodeBase64url(text: unknown, bytes: number, what: string): Decoded<Buffer> {
  if (typeof text !== "string") return { ok: false, reason: `${what} is not a string` };
  const length = Math.ceil((bytes * 4) / 3);
  if (text.length !== length)
    return {
      ok: false,
      reason: `${what} must be ${length} base64url characters (${bytes} bytes), not ${text.length}`,
    };
  if (!BASE64URL.test(text))
    return { ok: false, reason: `${what} is not base64url (A-Z a-z 0-9 - _, no padding)` };
  const raw = Buffer.from(text, "base64url");
  if (raw.length !== bytes || raw.toString("base64url") !== text)
    return { ok: false, reason: `${what} is not the canonical base64url of ${bytes} bytes` };
  return { ok: true, value: raw };
}

/**
 * Encodings of Ed25519 points of small order (the identity, orders 2, 4 and 8, and the
 * identity with its sign bit set). Such a "key" has no secret behind it: a signature may hold
 * for many messages or many keys. OpenSSL 3.5 (Node 24) already verifies no such signature
 * (test/hub-claims.test.ts pins it); refusing them at registration keeps that true whatever
 * library checks the signatures.
 */
const SMALL_ORDER = new Set([
  "0100000000000000000000000000000000000000000000000000000000000000",
  "0100000000000000000000000000000000000000000000000000000000000080",
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "0000000000000000000000000000000000000000000000000000000000000000",
  "0000000000000000000000000000000000000000000000000000000000000080",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
]);

export interface PublicKey {
  key: KeyObject;
  raw: Buffer;
  keyId: string;
}

/** A registered public key (base64url of 32 raw bytes) as a key object, or why not. Never throws. */
export function parsePublicKey(text: unknown): Decoded<PublicKey> {
  const raw = decodeBase64url(text, PUBLIC_KEY_BYTES, "the public key");
  if (!raw.ok) return raw;
  if (SMALL_ORDER.has(raw.value.toString("hex")))
    return { ok: false, reason: "the public key is a point of small order, not a key" };
  try {
    const key = createPublicKey({
      key: Buffer.concat([ED25519_SPKI_PREFIX, raw.value]),
      format: "der",
      type: "spki",
    });
    return { ok: true, value: { key, raw: raw.value, keyId: keyIdOf(raw.value) } };
  } catch {
    return { ok: false, reason: "the public key is not an Ed25519 point" };
  }
}
