// Drains JOBS no-op jobs with graphile-worker at WORKERS concurrency and prints how long it took,
// measured the way `bench_peer` measures Switchboard: the jobs are added before the clock starts,
// and the clock stops when the database says none are left. Like `bench_peer`, it reads the
// cluster's WAL counters (pg_stat_wal) just before the clock starts and after the workers have
// stopped, each once the connections that wrote have closed and after a pause.
// With BATCHED (`batched`), graphile-worker's batched mode: jobs fetched in batches into a local
// queue of WORKERS + 1 (its documented recommendation) and completions flushed together
// (completeJobBatchDelay 0), the peer of Switchboard's claim_next {max} + complete {ids}.
// Usage: node graphile_worker_drain.js DATABASE_URL WORKERS JOBS [batched]   (graphile-worker on NODE_PATH)
"use strict";
const { Logger, makeWorkerUtils, run } = require("graphile-worker");

const POLL_MS = 10;
const quiet = new Logger(() => () => {});
const REPORT_PAUSE_MS = 1500;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const [url, workersArg, jobsArg, mode] = process.argv.slice(2);
  const batched = mode === "batched";
  const workers = Number(workersArg);
  const jobs = Number(jobsArg);
  if (!url || !(workers > 0) || !(jobs > 0)) {
    throw new Error("usage: graphile_worker_drain.js DATABASE_URL WORKERS JOBS");
  }
  // Set up on connections of their own, closed before the first WAL reading: a connection that
  // stays open may report its WAL counters seconds later, inside the drain.
  const setup = await makeWorkerUtils({ connectionString: url, logger: quiet });
  await setup.migrate();
  await setup.withPgClient((client) =>
    client.query("SELECT graphile_worker.add_job('noop', '{}'::json) FROM generate_series(1, $1::int)", [jobs]),
  );
  await setup.release();
  const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
  // Only whether one is left, as bench_peer asks: the poll must not cost the drain it times.
  const left = async () =>
    (await utils.withPgClient((client) => client.query("SELECT EXISTS (SELECT 1 FROM graphile_worker.jobs) AS any")))
      .rows[0].any;
  const wal = async () => {
    await sleep(REPORT_PAUSE_MS);
    const { rows } = await utils.withPgClient((client) =>
      client.query("SELECT wal_bytes::float8 AS bytes, wal_records::float8 AS records, wal_sync::float8 AS flushes FROM pg_stat_wal"),
    );
    return rows[0];
  };
  const walBefore = await wal();
  const started = process.hrtime.bigint();
  const runner = await run({
    connectionString: url,
    concurrency: workers,
    maxPoolSize: workers + 2,
    noHandleSignals: true,
    logger: quiet,
    taskList: { noop: async () => {} },
    ...(batched ? { preset: { worker: { localQueue: { size: workers + 1 }, completeJobBatchDelay: 0 } } } : {}),
  });
  while (await left()) {
    await sleep(POLL_MS);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await runner.stop();
  const walAfter = await wal();
  await utils.release();
  console.log(JSON.stringify({ workers, jobs, batched, seconds, wal_before: walBefore, wal_after: walAfter }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
