/**
 * The dashboard's script (src/server/assets/app.js) is plain JavaScript the browser runs as it
 * is, but typechecked like the rest: against the DOM, lit-html's own types, the chart renderer
 * and the API's response shapes (src/server/api-types.ts). Its own tsconfig gives it the DOM
 * types the rest of autolab does not get, so `tsc -p .` leaves it out; this test runs it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "./helpers/toy-project.ts";

const ASSETS = join(REPO_ROOT, "src", "server", "assets");

describe("dashboard script types", () => {
  it("app.js typechecks against the DOM, lit-html, the chart renderer and the API's shapes", () => {
    const config = ts.getParsedCommandLineOfConfigFile(
      join(ASSETS, "tsconfig.json"),
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
          throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
        },
      },
    );
    if (!config) throw new Error("src/server/assets/tsconfig.json could not be read");
    expect(config.errors).toEqual([]);
    const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
    const appJs = program.getSourceFile(join(ASSETS, "app.js"));
    expect(appJs, "app.js is in the program").toBeDefined();
    // The page's imports resolve to what the server serves for them (src/server/app.ts).
    const resolved = program
      .getSourceFiles()
      .map((f) => f.fileName)
      .filter((f) => /progress-chart\.ts$|lit-html\/(lit-html|directives\/unsafe-html)\.d\.ts$/.test(f));
    expect(resolved).toHaveLength(3);
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const text = ts.flattenDiagnosticMessageText(d.messageText, "\n");
      if (!d.file || d.start === undefined) return text;
      const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
      return `${d.file.fileName.slice(REPO_ROOT.length + 1)}:${line + 1}:${character + 1} ${text}`;
    });
    expect(problems).toEqual([]);
    expect(readFileSync(join(ASSETS, "app.js"), "utf8")).toMatch(/^\/\/ @ts-check\n/);
  });
});
