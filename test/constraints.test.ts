import { describe, expect, it } from "vitest";
import { AutolabError } from "../src/core/errors.ts";
import { checkConstraints, parseConstraint } from "../src/trust/constraints.ts";

function parseError(expr: string): AutolabError {
  try {
    parseConstraint(expr);
  } catch (err) {
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("CONSTRAINT_INVALID");
    return err as AutolabError;
  }
  throw new Error(`expected "${expr}" to be rejected`);
}

describe("parseConstraint", () => {
  it("parses every operator", () => {
    for (const op of ["<=", "<", ">=", ">", "==", "!="] as const) {
      expect(parseConstraint(`peak_rss_mb ${op} 4096`)).toEqual({
        metric: "peak_rss_mb",
        op,
        value: 4096,
        text: `peak_rss_mb ${op} 4096`,
      });
    }
  });

  it("tolerates any whitespace and normalizes the text", () => {
    expect(parseConstraint("  wall_s<60 ")).toEqual({
      metric: "wall_s",
      op: "<",
      value: 60,
      text: "wall_s < 60",
    });
    expect(parseConstraint("loss\t>=\t-1.5")).toMatchObject({ op: ">=", value: -1.5 });
  });

  it("accepts decimals, exponents and signs", () => {
    expect(parseConstraint("a <= 1e-3").value).toBe(0.001);
    expect(parseConstraint("a <= .5").value).toBe(0.5);
    expect(parseConstraint("a >= +2.").value).toBe(2);
    expect(parseConstraint("val/bpb <= 1.2").metric).toBe("val/bpb");
  });

  it("rejects a missing operator, saying which ones exist", () => {
    expect(parseError("peak_rss_mb 4096").message).toMatch(/no comparison operator.*<=/);
  });

  it("suggests the right operator for habits from other languages", () => {
    expect(parseError("peak_rss_mb = 4096").message).toContain('did you mean "peak_rss_mb == 4096"');
    expect(parseError("peak_rss_mb =< 4096").message).toContain('did you mean "peak_rss_mb <= 4096"');
    expect(parseError("a <> 1").message).toContain('"a != 1"');
  });

  it("names the metric and operator when the number is missing or not a number", () => {
    expect(parseError("peak_rss_mb <=").message).toContain('no number after "peak_rss_mb <="');
    const err = parseError("peak_rss_mb <= 4GB");
    expect(err.message).toContain('after "peak_rss_mb <="');
    expect(err.message).toContain('"4GB"');
  });

  it("rejects a missing or malformed metric name", () => {
    expect(parseError("<= 4").message).toContain('no metric name before "<="');
    expect(parseError("peak rss <= 4").message).toContain('"peak rss" is not a metric name');
    expect(parseError("").message).toContain("empty");
  });

  it("shows the metric-first form of a reversed comparison", () => {
    expect(parseError("4096 >= peak_rss_mb").message).toContain('"peak_rss_mb <= 4096"');
  });
});

describe("checkConstraints", () => {
  const cs = ["peak_rss_mb <= 4096", "wall_s < 60", "accuracy >= 0.9", "mode == 1", "errors != 0"].map(
    parseConstraint,
  );

  it("passes when every constraint holds", () => {
    const r = checkConstraints(cs, { peak_rss_mb: 4096, wall_s: 59.9, accuracy: 0.9, mode: 1, errors: 1 });
    expect(r).toEqual({ ok: true, violations: [], missing: [] });
  });

  it("explains each violation with the value, the failed comparison and the constraint", () => {
    const r = checkConstraints(cs, { peak_rss_mb: 5120, wall_s: 60, accuracy: 0.5, mode: 2, errors: 0 });
    expect(r.ok).toBe(false);
    expect(r.violations).toEqual([
      "peak_rss_mb 5120 > 4096 (constraint peak_rss_mb <= 4096)",
      "wall_s 60 >= 60 (constraint wall_s < 60)",
      "accuracy 0.5 < 0.9 (constraint accuracy >= 0.9)",
      "mode 2 != 1 (constraint mode == 1)",
      "errors 0 == 0 (constraint errors != 0)",
    ]);
  });

  it("reports missing metrics separately, without failing", () => {
    const r = checkConstraints(cs.slice(0, 2), { wall_s: 1 });
    expect(r.ok).toBe(true);
    expect(r.violations).toEqual([]);
    expect(r.missing).toEqual(["peak_rss_mb was not reported (constraint peak_rss_mb <= 4096)"]);
  });

  it("treats NaN as a violation", () => {
    const r = checkConstraints(cs.slice(0, 1), { peak_rss_mb: Number.NaN });
    expect(r.ok).toBe(false);
    expect(r.violations[0]).toContain("NaN");
  });

  it("does not read inherited properties as metrics", () => {
    const r = checkConstraints([parseConstraint("constructor < 1")], {});
    expect(r.missing).toHaveLength(1);
  });

  it("is ok with no constraints", () => {
    expect(checkConstraints([], { a: 1 })).toEqual({ ok: true, violations: [], missing: [] });
  });
});
