import { describe, expect, it } from "vitest";
import { rankVariants, standingLines, type TournamentCell } from "../src/learn/tournament-stats.ts";

const cells = (variant: string, values: number[]): TournamentCell[] =>
  values.map((improvement, i) => ({ variant, seed: i + 1, improvement }));

describe("tournament standings", () => {
  it("ranks by mean; a challenger that is better on every seed beats the incumbent and is almost surely best", () => {
    const s = rankVariants(
      [
        ...cells("incumbent", [1, 2, 3, 2, 1]),
        ...cells("sharp", [5, 6, 7, 6, 5]),
        ...cells("vague", [0, 1, 2, 1, 0]),
      ],
      ["incumbent", "sharp", "vague"],
      "incumbent",
    );
    expect(s.standings.map((x) => x.variant)).toEqual(["sharp", "incumbent", "vague"]);
    const [sharp, inc, vague] = s.standings;
    expect(sharp?.mean).toBeCloseTo(5.8);
    expect(sharp?.vsIncumbent?.mean).toBeCloseTo(4);
    expect(sharp?.vsIncumbent?.beats).toBe(true);
    expect(sharp?.pBest).toBe(1);
    expect(vague?.vsIncumbent?.worse).toBe(true);
    expect(inc?.vsIncumbent).toBeUndefined();
    // Two challengers: each is judged at 1 − 0.05/2.
    expect(sharp?.vsIncumbent?.level).toBeCloseTo(0.975);
    expect(s.winner).toBe("sharp");
    expect(standingLines(s)[0]).toMatch(/^ 1\. sharp .*beats the incumbent$/);
  });

  it("noise that swamps the difference: no winner, P(best) shared", () => {
    const s = rankVariants(
      [...cells("incumbent", [10, -8, 3, -2, 6, -9]), ...cells("other", [-7, 9, -1, 4, -5, 8])],
      ["incumbent", "other"],
      "incumbent",
    );
    expect(s.winner).toBeUndefined();
    const other = s.standings.find((x) => x.variant === "other");
    expect(other?.vsIncumbent?.beats).toBe(false);
    expect(other?.vsIncumbent?.lo).toBeLessThan(0);
    expect(other?.vsIncumbent?.hi).toBeGreaterThan(0);
    expect(other?.pBest).toBeGreaterThan(0.2);
    expect(other?.pBest).toBeLessThan(0.8);
  });

  it("pairs by seed: a constant gain under large seed-to-seed noise still wins", () => {
    const noise = [30, -20, 5, -40, 25, 0];
    const s = rankVariants(
      [
        ...cells("incumbent", noise),
        ...cells(
          "better",
          noise.map((x) => x + 1),
        ),
      ],
      ["incumbent", "better"],
      "incumbent",
    );
    const better = s.standings[0];
    expect(better?.variant).toBe("better");
    expect(better?.lo).toBeLessThan(0); // its own interval is wide…
    expect(better?.vsIncumbent?.lo).toBeCloseTo(1); // …the paired one is not (every difference is 1)
    expect(s.winner).toBe("better");
  });

  it("compares only the seeds every variant has; identical variants tie", () => {
    const s = rankVariants(
      [...cells("incumbent", [2, 2, 2]), ...cells("twin", [2, 2])],
      ["incumbent", "twin"],
      "incumbent",
    );
    expect(s.seeds).toEqual([1, 2]);
    expect(s.standings.map((x) => x.pBest)).toEqual([0.5, 0.5]);
    expect(s.winner).toBeUndefined();
  });

  it("one seed decides nothing; two seeds that disagree in size widen the interval beyond the bootstrap's", () => {
    const one = rankVariants(
      [...cells("incumbent", [0]), ...cells("b", [50])],
      ["incumbent", "b"],
      "incumbent",
    );
    expect(one.standings[0]?.vsIncumbent?.lo).toBe(Number.NEGATIVE_INFINITY);
    expect(one.winner).toBeUndefined();
    // Differences 1 and 9: the bootstrap's lower bound is 1, Student's t (1 df) reaches far below 0.
    const two = rankVariants(
      [...cells("incumbent", [0, 0]), ...cells("b", [1, 9])],
      ["incumbent", "b"],
      "incumbent",
    );
    expect(two.standings[0]?.vsIncumbent?.lo).toBeLessThan(-40);
    expect(two.winner).toBeUndefined();
  });

  it("is deterministic for a seed", () => {
    const input = [...cells("incumbent", [1, 5, 2, 8]), ...cells("b", [3, 4, 6, 7])];
    expect(rankVariants(input, ["incumbent", "b"], "incumbent", 500, 7)).toEqual(
      rankVariants(input, ["incumbent", "b"], "incumbent", 500, 7),
    );
  });
});
