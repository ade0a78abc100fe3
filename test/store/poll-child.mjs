// Child process for test/store/restart.test.ts: one simulated poll of a cluster, done the way the live poller
// stores it (new auditIDs, merged token records and the source cursor in ONE transaction), optionally killed
// with SIGKILL at a given point inside that transaction.
// argv[2]: JSON { storeModule, path, events: [{ auditID, podUid, time }], cursor, crashAt? }
const job = JSON.parse(process.argv[2]);
const { openStore } = await import(job.storeModule);
const store = await openStore(job.path);
const cluster = 'prod';
const crash = (point) => {
  if (job.crashAt === point) process.kill(process.pid, 'SIGKILL');
};

await store.transaction(async (tx) => {
  const fresh = new Set(await tx.polls.markSeen(cluster, job.events.map((e) => e.auditID), job.now));
  crash('after-seen');
  const byPod = new Map((await tx.tokenRecords.list(cluster)).map((r) => [r.podUid, r]));
  for (const e of job.events) {
    if (!fresh.has(e.auditID)) continue;
    const r = byPod.get(e.podUid) ?? {
      cluster, kind: 'stale-token', subject: 'system:serviceaccount:kube-system:multus', namespace: 'kube-system',
      serviceAccount: 'multus', podUid: e.podUid, warnAfter: 0, requests: 0, firstSeen: e.time, lastSeen: e.time,
      userAgents: [], sourceIPs: [], hourly: {},
    };
    r.requests += 1;
    r.firstSeen = Math.min(r.firstSeen, e.time);
    r.lastSeen = Math.max(r.lastSeen, e.time);
    byPod.set(e.podUid, r);
  }
  await tx.tokenRecords.upsert([...byPod.values()]);
  crash('after-records');
  await tx.polls.setCursor(`file:/audit-${cluster}.log`, job.cursor);
  crash('before-commit');
});
await store.close();
