import { statSync } from "node:fs";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { signClaim, verifyClaim } from "../src/hub/claim.ts";
import { HubClient, identityPath, loadOrCreateIdentity } from "../src/hub/client.ts";

const HUB = "http://127.0.0.1:7878";

describe("the contributor's identity file", () => {
  it("is made once, readable only by its owner, and gives the same key on every load", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hub-id-"));
    const path = join(dir, "nested", "id.json");
    const a = await loadOrCreateIdentity(path, HUB);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const b = await loadOrCreateIdentity(path, HUB);
    expect(b.publicKey).toBe(a.publicKey);
    expect(b.keyId).toBe(a.keyId);
    // The reloaded private key signs claims the public key verifies.
    const claim = {
      parent: "a".repeat(40),
      bundleSha256: "b".repeat(64),
      harnessVersion: "0.9.0",
      hardwareClass: "cpu",
      budgetS: 10,
      seeds: [1],
      metrics: { loss: [1.5] },
      logSha256: "c".repeat(64),
      contributor: b.keyId,
      nonce: "n".repeat(22),
      createdAt: new Date().toISOString(),
    };
    expect(verifyClaim(signClaim(claim, b.privateKey), a.publicKey).ok).toBe(true);
  });

  it("refuses a damaged file or one whose key id is not its key's, naming the file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hub-id-"));
    const path = join(dir, "id.json");
    await writeFile(path, "{not json");
    await expect(loadOrCreateIdentity(path, HUB)).rejects.toMatchObject({ code: "HUB_IDENTITY_INVALID" });
    const good = join(dir, "good.json");
    await loadOrCreateIdentity(good, HUB);
    const stored = JSON.parse(await readFile(good, "utf8"));
    await writeFile(path, JSON.stringify({ ...stored, keyId: "0".repeat(64) }));
    await expect(loadOrCreateIdentity(path, HUB)).rejects.toThrow(/id\.json.*keyId/);
  });

  it("lives per hub under $XDG_CONFIG_HOME", () => {
    expect(identityPath("http://127.0.0.1:7878/", { XDG_CONFIG_HOME: "/x" })).toBe(
      "/x/autolab/hub/127.0.0.1_7878.json",
    );
  });
});

describe("the hub client", () => {
  it("refuses what is not an http(s) URL", () => {
    expect(() => new HubClient("ftp://x")).toThrow(/http/);
    expect(() => new HubClient("not a url")).toThrow(/not a URL/);
  });

  it("says the hub does not answer, naming it", async () => {
    // A port that was just listening and is closed now: the connection is refused.
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const port = (srv.address() as AddressInfo).port;
    await new Promise((r) => srv.close(r));
    const err = await new HubClient(`http://127.0.0.1:${port}`, 2000).program().catch((e) => e);
    expect(err).toMatchObject({ code: "HUB_UNREACHABLE" });
    expect(err.message).toContain(`127.0.0.1:${port}`);
    expect(err.message).toContain("ECONNREFUSED");
  });
});
