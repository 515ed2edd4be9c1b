/** The hub's token buckets (src/hub/rate-limit.ts), a clock stepped by hand, no timing; and the pure gates of src/hub/gates.ts. */
import { describe, expect, it } from "vitest";
import { addressKey, bearer, checkDeclaredLength, classify, HubError } from "../src/hub/gates.ts";
import { RateLimiter } from "../src/hub/rate-limit.ts";

describe("RateLimiter", () => {
  it("allows a burst of `capacity`, then refuses with the seconds until a token is back", () => {
    let now = 1_000_000;
    const r = new RateLimiter({ capacity: 3, refillPerS: 0.5 }, () => now);
    expect([r.take("a"), r.take("a"), r.take("a")].every((t) => t.ok)).toBe(true);
    expect(r.take("a")).toEqual({ ok: false, retryAfterS: 2 });
    // Another key has its own bucket.
    expect(r.take("b").ok).toBe(true);
    now += 1999;
    expect(r.take("a").ok).toBe(false);
    now += 1;
    expect(r.take("a")).toEqual({ ok: true, left: 0 });
  });

  it("refills up to capacity, never beyond, and never from a clock that steps back", () => {
    let now = 0;
    const r = new RateLimiter({ capacity: 2, refillPerS: 10 }, () => now);
    r.take("k");
    r.take("k");
    now = 3_600_000;
    expect(r.peek("k")).toBe(2);
    r.take("k");
    r.take("k");
    now = 0; // back in time
    expect(r.take("k").ok).toBe(false);
    expect(r.peek("k")).toBe(0);
  });

  it("a refused take costs nothing", () => {
    let now = 0;
    const r = new RateLimiter({ capacity: 1, refillPerS: 1 }, () => now);
    r.take("k");
    for (let i = 0; i < 100; i++) expect(r.take("k").ok).toBe(false);
    now = 1000;
    expect(r.take("k").ok).toBe(true);
  });

  it("keeps at most maxKeys buckets, dropping full ones first, then the least recently used", () => {
    let now = 0;
    const r = new RateLimiter({ capacity: 2, refillPerS: 1, maxKeys: 3 }, () => now);
    r.take("old", 2);
    r.take("x", 2);
    r.take("y", 2);
    r.take("old"); // refused, but used recently
    r.take("z", 2); // 4 keys, none full: "x" is the least recently used
    expect(r.size).toBe(3);
    expect(r.peek("x")).toBe(2); // forgotten: a fresh bucket
    expect(r.peek("old")).toBe(0);
    now = 10_000; // everything refilled
    r.take("w");
    expect(r.size).toBeLessThanOrEqual(3);
    expect(r.peek("w")).toBe(1);
  });

  it("refuses a limit that could never allow anything", () => {
    expect(() => new RateLimiter({ capacity: 0, refillPerS: 1 })).toThrow(RangeError);
    expect(() => new RateLimiter({ capacity: 1, refillPerS: 0 })).toThrow(RangeError);
  });
});

describe("addressKey: what limits per address count by", () => {
  it("IPv4 as is, IPv4-mapped IPv6 as IPv4, IPv6 by its /64, anything else local", () => {
    expect(addressKey("203.0.113.9")).toBe("203.0.113.9");
    expect(addressKey("::ffff:203.0.113.9")).toBe("203.0.113.9");
    expect(addressKey("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8:1:2:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:0db8:0001:0002:0000:0000:0000:0001")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
    expect(addressKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(addressKey(undefined)).toBe("local");
    expect(addressKey("not an address")).toBe("local");
  });
});

describe("the pure gates", () => {
  it("reads a bearer token only in its one form", () => {
    const t = "A".repeat(43);
    expect(bearer(`Bearer ${t}`)).toBe(t);
    expect(bearer(`bearer ${t}`)).toBeUndefined();
    expect(bearer(`Bearer ${t} extra`)).toBeUndefined();
    expect(bearer("Bearer short")).toBeUndefined();
    expect(bearer(undefined)).toBeUndefined();
  });

  it("refuses a declared length over the limit before reading", () => {
    expect(() => checkDeclaredLength("65537", 65536, "a claim")).toThrow(HubError);
    expect(() => checkDeclaredLength("65536", 65536, "a claim")).not.toThrow();
    expect(() => checkDeclaredLength("nonsense", 10, "a claim")).not.toThrow(); // the counting read decides
    expect(() => checkDeclaredLength(undefined, 10, "a claim")).not.toThrow();
  });

  it("classifies by the head's recorded value, direction aware; a pending head makes every claim frontier", () => {
    expect(classify(0.9, 1, "minimize")).toBe("frontier");
    expect(classify(1, 1, "minimize")).toBe("finding");
    expect(classify(1.1, 1, "maximize")).toBe("frontier");
    expect(classify(0.9, 1, "maximize")).toBe("finding");
    expect(classify(5, null, "minimize")).toBe("frontier");
  });
});
