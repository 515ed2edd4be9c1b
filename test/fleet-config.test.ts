/**
 * The fleet's configuration without a database: the URL (`--db`, `--fleet`, program.md's
 * `executor.fleet.db`), the password never shown, program.md's `executor:` key.
 */
import { describe, expect, it } from "vitest";
import { isAutolabError } from "../src/core/errors.ts";
import { maskUrl, parseFleetUrl, transient } from "../src/fleet/db.ts";
import { parseProgram } from "../src/program/index.ts";

const program = (over = "") =>
  parseProgram(
    `---
name: tiny
objective: { metric: score, direction: minimize }
run: { command: node train.mjs, budget: 30s }
files: { editable: [train.mjs] }
${over}---
Tune it.
`,
    "/p/program.md",
  );

describe("the fleet's URL", () => {
  it("masks the password wherever the URL is shown", () => {
    expect(maskUrl("postgres://autolab:s3cret@db:5432/lab")).toBe("postgres://autolab:***@db:5432/lab");
    expect(maskUrl("postgres://autolab@db/lab")).toBe("postgres://autolab@db/lab");
    expect(maskUrl("postgresql://u:p%40ss@h/d?schema=x")).toBe("postgresql://u:***@h/d?schema=x");
  });

  it("takes autolab's ?schema= out of the connection string and checks it", () => {
    const u = parseFleetUrl("postgres://u:pw@h/d?schema=team_a&sslmode=require");
    expect(u.schema).toBe("team_a");
    expect(u.connectionString).toBe("postgres://u:pw@h/d?sslmode=require");
    expect(u.shown).toBe("postgres://u:***@h/d?schema=team_a&sslmode=require");
    expect(parseFleetUrl("postgres://h/d").schema).toBe("autolab_fleet");
  });

  it("refuses what is not a postgres:// URL, or a schema that is not a plain SQL name, saying which", () => {
    const codeOf = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        return isAutolabError(err) ? `${err.code}: ${err.message}` : String(err);
      }
      return "accepted";
    };
    expect(codeOf(() => parseFleetUrl("mysql://u:pw@h/d", "--fleet"))).toMatch(
      /^FLEET_URL_INVALID: --fleet "mysql:\/\/u:\*\*\*@h\/d" is not a PostgreSQL URL/,
    );
    expect(codeOf(() => parseFleetUrl("not a url"))).toMatch(
      /^FLEET_URL_INVALID: --db "not a url" is not a URL/,
    );
    expect(codeOf(() => parseFleetUrl("postgres://h/d?schema=x;drop"))).toMatch(
      /^FLEET_URL_INVALID: --db: schema "x;drop" is not a plain lower-case SQL name/,
    );
  });

  it("tells a restarted or unreachable server from a real error", () => {
    expect(transient(Object.assign(new Error("terminating connection"), { code: "57P01" }))).toBe(true);
    expect(transient(Object.assign(new Error("connect"), { code: "ECONNREFUSED" }))).toBe(true);
    expect(transient(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(transient(Object.assign(new Error("syntax error"), { code: "42601" }))).toBe(false);
  });
});

describe("program.md's executor.fleet", () => {
  it("names the fleet's database; a password in it is refused with its line (program.md is committed)", () => {
    expect(program().executor).toBeUndefined();
    expect(program("executor: { fleet: { db: 'postgres://autolab@db/lab' } }\n").executor).toEqual({
      fleet: { db: "postgres://autolab@db/lab" },
    });
    expect(() => program("executor: { fleet: { db: 'postgres://autolab:hunter2@db/lab' } }\n")).toThrow(
      /must not carry a password/,
    );
    expect(() => program("executor: { fleet: { db: 'mysql://db/lab' } }\n")).toThrow(/postgres:\/\//);
    expect(() => program("executor: { fleet: { url: 'postgres://db/lab' } }\n")).toThrow(/url/);
  });
});
