// `autolab init --example tiny-lm` in the checkout: the example's `gitignore` (npm never packs a
// file named .gitignore) becomes .gitignore, so the node_modules link stays out of the first
// commit; a .gitignore already there is a clash, never overwritten.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { initProject } from "../src/app/init.ts";
import { AutolabError } from "../src/core/errors.ts";

const work = mkdtempSync(join(tmpdir(), "autolab-init-example-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

it("copies tiny-lm with its .gitignore; the node_modules link is not committed", async () => {
  const dir = join(work, "lm");
  const res = await initProject(dir, "tiny-lm");
  expect(res.committed).toBe(true);
  expect(res.files).toContain(".gitignore");
  expect(res.files).not.toContain("gitignore");
  expect(existsSync(join(dir, "gitignore"))).toBe(false);
  expect(readFileSync(join(dir, ".gitignore"), "utf8")).toMatch(/^node_modules$/m);
  expect(existsSync(join(dir, "node_modules", "@stdlib", "datasets-moby-dick", "package.json"))).toBe(true);
  const tracked = execFileSync("git", ["ls-files"], { cwd: dir, encoding: "utf8" }).trim().split("\n");
  expect(tracked).toContain(".gitignore");
  expect(tracked).toContain("train.ts");
  expect(tracked.filter((f) => f.startsWith("node_modules"))).toEqual([]);
});

it("a .gitignore already in the directory is a clash, left as it was", async () => {
  const dir = join(work, "has-ignore");
  execFileSync("mkdir", ["-p", dir]);
  writeFileSync(join(dir, ".gitignore"), "mine\n");
  const err = await initProject(dir, "tiny-lm").catch((e: unknown) => e);
  expect(err).toBeInstanceOf(AutolabError);
  expect((err as AutolabError).code).toBe("INIT_CLASH");
  expect((err as AutolabError).message).toContain(".gitignore");
  expect(readFileSync(join(dir, ".gitignore"), "utf8")).toBe("mine\n");
});
