import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

/** Debian's chromium (installed by .ci/run), or AUTOLAB_CHROMIUM; undefined where there is none. */
export const CHROMIUM: string | undefined =
  process.env.AUTOLAB_CHROMIUM ??
  ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));

/**
 * Chromium as this machine allows it: headless, no sandbox (tests may run as root), and
 * nothing reaching out to the network (the machine's network is closed; background services
 * would only produce refused connections).
 */
export function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
