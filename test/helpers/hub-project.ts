/**
 * A project for the hub's tests: program.md with `train.py` and `src/` editable, `evaluate.py`
 * and `data/` protected, a 60 s budget; and helpers to make candidate bundles from it the way a
 * contributor would (`git bundle create <file> <parent>..<branch>`).
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { type Claim, type SignedClaim, signClaim } from "../../src/hub/claim.ts";
import type { Identity } from "../../src/hub/identity.ts";
import { createGitProject, type GitProject, gitSync, tempDir } from "./git-project.ts";

export const HUB_PROGRAM = `---
name: hub-toy
objective: { metric: val_loss, direction: minimize }
run:
  command: python train.py
  evaluate: python evaluate.py
  budget: 60s
files:
  editable: [train.py, src/]
  protected: [evaluate.py, data/]
---
Make val_loss smaller.
`;

export function hubProject(prefix = ""): GitProject & { projectDir: string } {
  const p = createGitProject({
    [`${prefix}program.md`]: HUB_PROGRAM,
    [`${prefix}train.py`]: "LR = 0.1\n",
    [`${prefix}evaluate.py`]: "print('val_loss: 1')\n",
    [`${prefix}data/train.csv`]: "1,2\n",
    [`${prefix}src/model.py`]: "W = 1\n",
    "README.md": "top\n",
  });
  return Object.assign(p, { projectDir: join(p.root, prefix) });
}

/**
 * A contributor's candidate: a branch from `parent` with `files` written (null deletes), one
 * commit; returns the commit and a bundle of parent..commit.
 */
export function candidate(
  p: GitProject,
  parent: string,
  files: Record<string, string | null>,
  o: { message?: string; branch?: string } = {},
): { commit: string; bundle: string } {
  const branch = o.branch ?? `c-${Math.random().toString(36).slice(2, 10)}`;
  gitSync(p.root, "checkout", "-q", "-b", branch, parent);
  for (const [path, content] of Object.entries(files)) {
    if (content === null) gitSync(p.root, "rm", "-q", path);
    else p.write({ [path]: content });
  }
  const commit = p.commitAll(o.message ?? "candidate");
  const bundle = join(tempDir("autolab-hub-bundle-"), "c.bundle");
  gitSync(p.root, "bundle", "create", "-q", bundle, `${parent}..${branch}`);
  gitSync(p.root, "checkout", "-q", "--detach", parent);
  return { commit, bundle };
}

/** A signed claim for the hub-toy program, honest by default; `over` replaces fields before signing. */
export function signedClaimFor(
  me: Identity,
  o: { parent: string; bundleSha256: string; createdAt: number; values?: number[]; over?: Partial<Claim> },
): SignedClaim {
  const values = o.values ?? [0.9, 0.91, 0.89];
  return signClaim(
    {
      parent: o.parent,
      bundleSha256: o.bundleSha256,
      harnessVersion: "0.9.0",
      hardwareClass: "cpu",
      budgetS: 60,
      seeds: values.map((_, i) => i + 1),
      metrics: { val_loss: values },
      logSha256: "a".repeat(64),
      contributor: me.keyId,
      nonce: randomBytes(16).toString("base64url"),
      createdAt: new Date(o.createdAt).toISOString(),
      ...o.over,
    },
    me.privateKey,
  );
}
