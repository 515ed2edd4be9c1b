/**
 * The load generator of bench/hub.ts, run as a child process (default) or a worker thread, so
 * that the client's JSON, HTTP and bookkeeping never run on the hub's event loop: `conns` loops,
 * each on its own keep-alive socket to 127.0.0.1, POST /api/claims with the next request of its
 * share, back to back. Latencies are recorded after the warm-up; the figures are sent back to the
 * parent (postMessage or IPC) and the generator exits.
 */
import http from "node:http";
import { performance } from "node:perf_hooks";
import { parentPort, workerData } from "node:worker_threads";

export interface LoadJob {
  port: number;
  /** Requests: [bearer token, body]. Cycled when `cycle`, else each sent once (the loops stop when done). */
  requests: Array<[string, string]>;
  cycle: boolean;
  conns: number;
  warmupMs: number;
  durationMs: number;
}

export interface LoadResult {
  /** Latencies (ms) of the requests completed in the measured window. */
  latencies: Float64Array;
  /** Status → count, measured window only. */
  statuses: Record<string, number>;
  /** The first answer body per status (to show what the hub said). */
  samples: Record<string, string>;
  /** How long the measured window really lasted (ms): shorter when a non-cycled list ran out. */
  windowMs: number;
  /** This thread's event-loop utilization over the measured window (1 = saturated). */
  elu: number;
  /** Requests that failed at the socket (never answered). */
  errors: number;
}

function post(agent: http.Agent, port: number, token: string, body: string): Promise<[number, string]> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/api/claims",
        agent,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          authorization: `Bearer ${token}`,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve([res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8")]));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

async function run(job: LoadJob): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.conns });
  const t0 = performance.now();
  const from = t0 + job.warmupMs;
  const until = from + job.durationMs;
  let next = 0;
  let lat = new Float64Array(1 << 16);
  let n = 0;
  let errors = 0;
  let lastEnd = from;
  const statuses: Record<string, number> = {};
  const samples: Record<string, string> = {};
  let elu0: ReturnType<typeof performance.eventLoopUtilization> | undefined;
  const eluTimer = setTimeout(
    () => {
      elu0 = performance.eventLoopUtilization();
    },
    Math.max(0, job.warmupMs),
  );
  const loop = async () => {
    for (;;) {
      const now = performance.now();
      if (now >= until) return;
      if (!job.cycle && next >= job.requests.length) return;
      const [token, body] = job.requests[next++ % job.requests.length] as [string, string];
      const start = performance.now();
      let status: number;
      let text: string;
      try {
        [status, text] = await post(agent, job.port, token, body);
      } catch {
        if (start >= from) errors++;
        continue;
      }
      const end = performance.now();
      if (start >= from && end <= until) {
        if (n === lat.length) {
          const more = new Float64Array(lat.length * 2);
          more.set(lat);
          lat = more;
        }
        lat[n++] = end - start;
        const k = String(status);
        statuses[k] = (statuses[k] ?? 0) + 1;
        if (samples[k] === undefined) samples[k] = text.slice(0, 300);
        if (end > lastEnd) lastEnd = end;
      }
    }
  };
  await Promise.all(Array.from({ length: job.conns }, loop));
  clearTimeout(eluTimer);
  const elu = elu0 ? performance.eventLoopUtilization(elu0).utilization : Number.NaN;
  agent.destroy();
  const windowMs = job.cycle ? job.durationMs : Math.min(job.durationMs, lastEnd - from);
  return { latencies: lat.slice(0, n), statuses, samples, windowMs, elu, errors };
}

if (parentPort) {
  const result = await run(workerData as LoadJob);
  parentPort.postMessage(result, [result.latencies.buffer as ArrayBuffer]);
} else if (process.send) {
  // A child process (child_process.fork with serialization "advanced"): the job comes by IPC.
  const job = await new Promise<LoadJob>((resolve) => process.once("message", (m) => resolve(m as LoadJob)));
  const result = await run(job);
  process.send(result, () => process.disconnect());
}
