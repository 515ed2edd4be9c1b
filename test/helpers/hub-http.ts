/**
 * A contributor of a hub as its HTTP client does it, for tests that need real claims in a
 * started hub (startHub): register a key, upload a candidate's bundle, send its signed claim.
 */
import { readFileSync } from "node:fs";
import { expect } from "vitest";
import { sha256Hex } from "../../src/hub/gates.ts";
import { generateIdentity, type Identity } from "../../src/hub/identity.ts";
import type { GitProject } from "./git-project.ts";
import { candidate, signedClaimFor } from "./hub-project.ts";

export interface Contributor {
  id: Identity;
  token: string;
}

export async function registerAt(url: string): Promise<Contributor> {
  const id = generateIdentity();
  const r = await fetch(`${url}/api/register`, {
    method: "POST",
    body: JSON.stringify({ publicKey: id.publicKey }),
  });
  expect(r.status).toBe(201);
  return { id, token: ((await r.json()) as { token: string }).token };
}

/**
 * A candidate on `parent` committed with `message`, its bundle uploaded and its claim sent;
 * returns the commit and the hub's answer.
 */
export async function claimAt(
  url: string,
  who: Contributor,
  p: GitProject,
  o: { parent: string; message: string; files: Record<string, string>; createdAt: number; values?: number[] },
): Promise<{ commit: string; status: number; body: Record<string, unknown> }> {
  const c = candidate(p, o.parent, o.files, { message: o.message });
  const data = readFileSync(c.bundle);
  const sha = sha256Hex(data);
  const auth = { authorization: `Bearer ${who.token}` };
  const put = await fetch(`${url}/api/bundles/${sha}`, { method: "PUT", headers: auth, body: data });
  expect([200, 201]).toContain(put.status);
  const claim = signedClaimFor(who.id, {
    parent: o.parent,
    bundleSha256: sha,
    createdAt: o.createdAt,
    ...(o.values ? { values: o.values } : {}),
  });
  const r = await fetch(`${url}/api/claims`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify(claim),
  });
  return { commit: c.commit, status: r.status, body: (await r.json()) as Record<string, unknown> };
}
