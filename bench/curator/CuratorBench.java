// Apache Curator InterProcessMutex and InterProcessReadWriteLock benchmark, the
// reference side of zklock's benchmark (see bench/README.md). Plain javac against Debian's jars, no build
// tool:
//
//   CP=/usr/share/java/curator-recipes.jar:/usr/share/java/slf4j-nop.jar
//   javac -cp $CP -d target/bench-java bench/curator/CuratorBench.java
//   java -cp target/bench-java:$CP CuratorBench [host:port]
//
// The ZooKeeper address comes from the first argument, else ZK_CONNECT, else
// 127.0.0.1:2181. Progress goes to stderr; stdout gets exactly one JSON line
// with the same keys as the Rust benchmark (zklock-bench).
//
// Environment:
//   BENCH_SECONDS          measured seconds per timed workload (default 5)
//   BENCH_WARMUP_SECONDS   unmeasured warm-up before each timed workload (default 1)
//   BENCH_CLIENTS          sessions in the contended workload (default 8)
//   BENCH_REENTRANT_ITERS  nested acquire+release pairs per measured round (default 1000000)
//   BENCH_REENTRANT_WARMUP_SECONDS  minimum JIT warm-up of the reentrant loop (default 2)
//   BENCH_HOLD_US          hold of each read-mostly operation, microseconds (default 0)
//   BENCH_WORKLOADS        comma-separated subset of uncontended,contended,reentrant,read,
//                          read_mostly,semaphore (default: all; the floor comes with uncontended);
//                          skipped figures print as null; and scale (long: only when named)
//   BENCH_SCALE_WAITERS    the scale workload's queue lengths (default 1000,5000,10000)
//   BENCH_SCALE_TIMEOUT    bound on each of its runs, seconds (default 300)
//   BENCH_MANY_PATHS       the many_locks workload's path counts (default 16,200,1000,10000;
//                          only when BENCH_WORKLOADS names many_locks)
//   BENCH_MANY_THREAD_CAP  its most threads (one per path; default 10000)
//
// Over TLS, the ZooKeeper client's own system properties (scripts/bench BENCH_TLS=1 sets them):
//   -Dzookeeper.client.secure=true -Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty
//   -Dzookeeper.ssl.keyStore.location=KEY_AND_CERT.pem -Dzookeeper.ssl.keyStore.type=PEM
//   -Dzookeeper.ssl.trustStore.location=CA.pem -Dzookeeper.ssl.trustStore.type=PEM
// with the Netty jars on the classpath, and the server's TLS address as the argument.

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.StandardLockInternalsDriver;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

public final class CuratorBench {
    // Over TLS (the ZooKeeper client's zookeeper.client.secure, set by scripts/bench): a column of
    // its own beside the plaintext one.
    static final String IMPL = "curator 5.4.0" + (Boolean.getBoolean("zookeeper.client.secure") ? " over TLS" : "");
    static final int SESSION_TIMEOUT_MS = 10_000;
    static final int CONNECTION_TIMEOUT_MS = 15_000;
    /** Bound on any single blocking acquire, so a broken server fails the run instead of hanging it. */
    static final long ACQUIRE_TIMEOUT_S = 60;
    /** The semaphore workload: sessions, and the max leases (zklock-bench's the same). */
    static final int SEMAPHORE_SESSIONS = 16;
    static final int SEMAPHORE_MAX = 4;
    /** One operation in this many of the read-mostly workload is a write. */
    static final long WRITE_ONE_IN = 10;

    static String connect;
    static double seconds;
    static double warmupSeconds;

    public static void main(String[] args) throws Exception {
        connect = args.length > 0 ? args[0] : envOr("ZK_CONNECT", "127.0.0.1:2181");
        seconds = Double.parseDouble(envOr("BENCH_SECONDS", "5"));
        warmupSeconds = Double.parseDouble(envOr("BENCH_WARMUP_SECONDS", "1"));
        int clients = Integer.parseInt(envOr("BENCH_CLIENTS", "8"));
        long reentrantIters = Long.parseLong(envOr("BENCH_REENTRANT_ITERS", "1000000"));
        long holdUs = Long.parseLong(envOr("BENCH_HOLD_US", "0"));
        List<String> workloads = new ArrayList<>();
        for (String w : envOr("BENCH_WORKLOADS", "").split(",")) {
            if (!w.trim().isEmpty()) {
                workloads.add(w.trim());
            }
        }
        if (!(seconds > 0) || warmupSeconds < 0 || clients < 1 || reentrantIters < 1 || holdUs < 0) {
            throw new IllegalArgumentException("bad BENCH_* setting");
        }

        // One fresh root per run; every lock path lives under it and it is removed at the end.
        String root = "/zklock-bench-curator-" + UUID.randomUUID();
        log("connect=%s root=%s seconds=%s warmup=%s clients=%d", connect, root, seconds, warmupSeconds, clients);

        int status = 0;
        CuratorFramework client = newClient();
        try {
            client.create().forPath(root);

            double nan = Double.NaN;
            double[] unc = wanted(workloads, "uncontended")
                ? uncontended(client, root + "/uncontended", false) : new double[] {nan, nan, nan, nan, nan};
            double handoffs = wanted(workloads, "contended") ? contended(root + "/contended", clients) : nan;
            double reentrantNs = wanted(workloads, "reentrant") ? reentrant(client, root + "/reentrant", reentrantIters) : nan;
            double floor = wanted(workloads, "uncontended") ? floor(client, root + "/floor") : nan;
            double[] read = wanted(workloads, "read")
                ? uncontended(client, root + "/read", true) : new double[] {nan, nan, nan, nan, nan};
            double[] mostly = wanted(workloads, "read_mostly")
                ? readMostly(root + "/read-mostly", clients, holdUs) : new double[] {nan, nan, nan, nan, nan, nan};
            double[] leases = wanted(workloads, "semaphore")
                ? semaphore(root + "/semaphore", SEMAPHORE_SESSIONS, SEMAPHORE_MAX) : new double[] {nan, nan, nan};
            // Long: only when named.
            Map<String, Object> scaled = workloads.contains("scale") ? scale(root) : new LinkedHashMap<>();
            if (workloads.contains("many_locks")) {
                scaled.putAll(manyLocks(client, root));
            }

            StringBuilder sb = new StringBuilder();
            sb.append('{');
            sb.append("\"impl\":\"").append(IMPL).append('"');
            field(sb, "uncontended_cycles_per_s", unc[0]);
            field(sb, "acquire_p50_us", unc[1]);
            field(sb, "acquire_p99_us", unc[2]);
            field(sb, "release_p50_us", unc[3]);
            field(sb, "release_p99_us", unc[4]);
            field(sb, "handoffs_per_s", handoffs);
            field(sb, "reentrant_ns", reentrantNs);
            field(sb, "floor_cycles_per_s", floor);
            field(sb, "read_cycles_per_s", read[0]);
            field(sb, "read_acquire_p50_us", read[1]);
            field(sb, "read_acquire_p99_us", read[2]);
            field(sb, "read_release_p50_us", read[3]);
            field(sb, "read_release_p99_us", read[4]);
            field(sb, "read_mostly_ops_per_s", mostly[0]);
            field(sb, "read_mostly_reader_wait_p50_us", mostly[1]);
            field(sb, "read_mostly_reader_wait_p99_us", mostly[2]);
            field(sb, "read_mostly_writer_wait_p50_us", mostly[3]);
            field(sb, "read_mostly_writer_wait_p99_us", mostly[4]);
            field(sb, "read_mostly_hold_us", mostly[5]);
            field(sb, "semaphore_leases_per_s", leases[0]);
            field(sb, "semaphore_wait_p50_us", leases[1]);
            field(sb, "semaphore_wait_p99_us", leases[2]);
            for (Map.Entry<String, Object> e : scaled.entrySet()) {
                sb.append(",\"").append(e.getKey()).append("\":");
                Object v = e.getValue();
                if (v instanceof Double) {
                    double d = (Double) v;
                    sb.append(Double.isFinite(d) ? String.format(Locale.ROOT, "%.1f", d) : "null");
                } else if (v instanceof String) {
                    sb.append(jsonString((String) v));
                } else {
                    sb.append(v); // Long, Boolean, or null
                }
            }
            sb.append('}');
            System.out.println(sb);
            System.out.flush();
        } catch (Throwable t) {
            log("FAILED: %s", t);
            t.printStackTrace();
            status = 1;
        } finally {
            try {
                client.delete().deletingChildrenIfNeeded().forPath(root);
            } catch (KeeperException.NoNodeException ignored) {
                // nothing was created
            } catch (Exception e) {
                log("cleanup of %s failed: %s", root, e);
            }
            client.close();
        }
        // Curator/ZooKeeper may leave non-daemon threads behind; do not wait for them.
        System.exit(status);
    }

    // ---------------------------------------------------------------- workloads

    /**
     * Workload 1: acquire()+release() loop on a private path, of an InterProcessMutex or (read) of
     * an InterProcessReadWriteLock's readLock(). Returns {cycles/s, acq p50, acq p99, rel p50, rel p99}.
     */
    static double[] uncontended(CuratorFramework client, String path, boolean read) throws Exception {
        InterProcessMutex mutex = read
            ? new InterProcessReadWriteLock(client, path).readLock()
            : new InterProcessMutex(client, path);
        LongList acq = new LongList();
        LongList rel = new LongList();

        long warmEnd = System.nanoTime() + nanos(warmupSeconds);
        while (System.nanoTime() < warmEnd) {
            acquire(mutex);
            mutex.release();
        }

        long start = System.nanoTime();
        long end = start + nanos(seconds);
        long now = start;
        long cycles = 0;
        while (now < end) {
            long t0 = now;
            acquire(mutex);
            long t1 = System.nanoTime();
            mutex.release();
            now = System.nanoTime();
            acq.add(t1 - t0);
            rel.add(now - t1);
            cycles++;
        }
        double elapsed = (now - start) / 1e9;
        double rate = cycles / elapsed;
        long[] a = acq.sorted();
        long[] r = rel.sorted();
        double[] out = {
            rate,
            pct(a, 50) / 1e3, pct(a, 99) / 1e3,
            pct(r, 50) / 1e3, pct(r, 99) / 1e3,
        };
        log("uncontended%s: %d cycles in %.3fs = %.1f/s; acquire p50 %.0fus p99 %.0fus; release p50 %.0fus p99 %.0fus",
            read ? " read" : "", cycles, elapsed, rate, out[1], out[2], out[3], out[4]);
        return out;
    }

    /** Workload 2: N sessions, one thread and one InterProcessMutex each, all on one path. Returns acquisitions/s. */
    static double contended(String path, int n) throws Exception {
        List<CuratorFramework> clients = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        AtomicBoolean stop = new AtomicBoolean(false);
        AtomicLong counter = new AtomicLong();      // total acquisitions (incremented while holding)
        AtomicInteger inside = new AtomicInteger(); // mutual-exclusion check
        AtomicLong violations = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch ready = new CountDownLatch(n);
        CountDownLatch go = new CountDownLatch(1);
        long[] perThread = new long[n];
        try {
            for (int i = 0; i < n; i++) {
                clients.add(newClient());
            }
            for (int i = 0; i < n; i++) {
                final int id = i;
                final InterProcessMutex mutex = new InterProcessMutex(clients.get(i), path);
                Thread t = new Thread(() -> {
                    try {
                        ready.countDown();
                        go.await();
                        while (!stop.get()) {
                            acquire(mutex);
                            try {
                                if (inside.incrementAndGet() != 1) {
                                    violations.incrementAndGet();
                                }
                                counter.incrementAndGet();
                                perThread[id]++;
                                inside.decrementAndGet();
                            } finally {
                                mutex.release();
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                        stop.set(true);
                    }
                }, "contender-" + i);
                t.setDaemon(true);
                threads.add(t);
                t.start();
            }
            ready.await();
            go.countDown();
            sleepSeconds(warmupSeconds);
            long c0 = counter.get();
            long t0 = System.nanoTime();
            sleepSeconds(seconds);
            long c1 = counter.get();
            long t1 = System.nanoTime();
            stop.set(true);
            joinChecked(threads, failure, violations, "contender", "mutual exclusion");
            double elapsed = (t1 - t0) / 1e9;
            double rate = (c1 - c0) / elapsed;
            log("contended: %d sessions, %d handoffs in %.3fs = %.1f/s; per-session totals %s",
                n, c1 - c0, elapsed, rate, Arrays.toString(perThread));
            return rate;
        } finally {
            stop.set(true);
            for (CuratorFramework c : clients) {
                c.close();
            }
        }
    }

    /**
     * The semaphore workload: n sessions, one thread and one InterProcessSemaphoreV2 (max leases)
     * each, all on one path, each acquiring one lease and returning it at once (as contended holds
     * its mutex). At most max holding is checked while holding. Returns {leases/s, wait p50 us,
     * wait p99 us}, the waits of the acquisitions begun in the measured window.
     */
    static double[] semaphore(String path, int n, int max) throws Exception {
        List<CuratorFramework> clients = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        AtomicBoolean stop = new AtomicBoolean(false);
        AtomicBoolean measuring = new AtomicBoolean(false);
        AtomicLong counter = new AtomicLong();
        AtomicInteger inside = new AtomicInteger();
        AtomicLong violations = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch ready = new CountDownLatch(n);
        CountDownLatch go = new CountDownLatch(1);
        LongList[] waits = new LongList[n];
        try {
            for (int i = 0; i < n; i++) {
                clients.add(newClient());
            }
            for (int i = 0; i < n; i++) {
                final LongList mine = waits[i] = new LongList();
                final InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(clients.get(i), path, max);
                Thread t = new Thread(() -> {
                    try {
                        ready.countDown();
                        go.await();
                        while (!stop.get()) {
                            boolean measured = measuring.get();
                            long t0 = System.nanoTime();
                            Lease lease = semaphore.acquire(ACQUIRE_TIMEOUT_S, TimeUnit.SECONDS);
                            if (lease == null) {
                                throw new IllegalStateException("acquire timed out after " + ACQUIRE_TIMEOUT_S + "s");
                            }
                            long waited = System.nanoTime() - t0;
                            try {
                                if (inside.incrementAndGet() > max) {
                                    violations.incrementAndGet();
                                }
                                if (measured && measuring.get()) {
                                    mine.add(waited);
                                }
                                counter.incrementAndGet();
                                inside.decrementAndGet();
                            } finally {
                                semaphore.returnLease(lease);
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                        stop.set(true);
                    }
                }, "lease-taker-" + i);
                t.setDaemon(true);
                threads.add(t);
                t.start();
            }
            ready.await();
            go.countDown();
            sleepSeconds(warmupSeconds);
            measuring.set(true);
            long c0 = counter.get();
            long t0 = System.nanoTime();
            sleepSeconds(seconds);
            long c1 = counter.get();
            long t1 = System.nanoTime();
            measuring.set(false);
            stop.set(true);
            joinChecked(threads, failure, violations, "lease taker", "at most " + max + " leases held");
            LongList all = new LongList();
            for (LongList w : waits) {
                all.addAll(w);
            }
            long[] sorted = all.sorted();
            double elapsed = (t1 - t0) / 1e9;
            double rate = (c1 - c0) / elapsed;
            log("semaphore: max %d, %d sessions, %d leases in %.3fs = %.1f/s; wait p50 %.0fus p99 %.0fus",
                max, n, c1 - c0, elapsed, rate, pct(sorted, 50) / 1e3, pct(sorted, 99) / 1e3);
            return new double[] {rate, pct(sorted, 50) / 1e3, pct(sorted, 99) / 1e3};
        } finally {
            stop.set(true);
            for (CuratorFramework c : clients) {
                c.close();
            }
        }
    }

    /**
     * Workload 5 (read-mostly): N sessions, one thread and one InterProcessReadWriteLock each, all
     * on one path, each looping over its OpSequence: acquire the read (or write) side, hold for
     * holdUs, release. Sharing and exclusion are checked while holding. Returns {ops/s, reader wait
     * p50 us, p99 us, writer wait p50 us, p99 us, mean hold us}, the waits and holds of the
     * operations begun in the measured window.
     */
    static double[] readMostly(String path, int n, long holdUs) throws Exception {
        List<CuratorFramework> clients = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        AtomicBoolean stop = new AtomicBoolean(false);
        AtomicBoolean measuring = new AtomicBoolean(false);
        AtomicLong ops = new AtomicLong();
        AtomicInteger readersIn = new AtomicInteger();
        AtomicInteger writersIn = new AtomicInteger();
        AtomicLong violations = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch ready = new CountDownLatch(n);
        CountDownLatch go = new CountDownLatch(1);
        LongList[] readerWaits = new LongList[n];
        LongList[] writerWaits = new LongList[n];
        long[] heldNanos = new long[n];
        long[] holds = new long[n];
        try {
            for (int i = 0; i < n; i++) {
                clients.add(newClient());
            }
            for (int i = 0; i < n; i++) {
                final int id = i;
                final InterProcessReadWriteLock rw = new InterProcessReadWriteLock(clients.get(i), path);
                readerWaits[i] = new LongList();
                writerWaits[i] = new LongList();
                Thread t = new Thread(() -> {
                    try {
                        OpSequence sequence = new OpSequence(id);
                        ready.countDown();
                        go.await();
                        while (!stop.get()) {
                            boolean write = sequence.nextIsWrite();
                            InterProcessMutex side = write ? rw.writeLock() : rw.readLock();
                            boolean recording = measuring.get();
                            long asked = System.nanoTime();
                            acquire(side);
                            long waited = System.nanoTime() - asked;
                            AtomicInteger inside = write ? writersIn : readersIn;
                            try {
                                // A writer finds nobody inside; a reader finds no writer.
                                boolean alone;
                                if (write) {
                                    alone = writersIn.getAndIncrement() == 0 && readersIn.get() == 0;
                                } else {
                                    readersIn.incrementAndGet();
                                    alone = writersIn.get() == 0;
                                }
                                if (!alone) {
                                    violations.incrementAndGet();
                                }
                                long heldFrom = System.nanoTime();
                                sleepNanos(holdUs * 1_000L);
                                long held = System.nanoTime() - heldFrom;
                                if (recording) {
                                    (write ? writerWaits : readerWaits)[id].add(waited);
                                    heldNanos[id] += held;
                                    holds[id]++;
                                }
                                inside.decrementAndGet();
                            } finally {
                                side.release();
                            }
                            ops.incrementAndGet();
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                        stop.set(true);
                    }
                }, "read-mostly-" + i);
                t.setDaemon(true);
                threads.add(t);
                t.start();
            }
            ready.await();
            go.countDown();
            sleepSeconds(warmupSeconds);
            measuring.set(true);
            long c0 = ops.get();
            long t0 = System.nanoTime();
            sleepSeconds(seconds);
            long c1 = ops.get();
            long t1 = System.nanoTime();
            measuring.set(false);
            stop.set(true);
            joinChecked(threads, failure, violations, "read-mostly session", "read/write exclusion");
            LongList reads = new LongList();
            LongList writes = new LongList();
            long heldTotal = 0;
            long holdCount = 0;
            for (int i = 0; i < n; i++) {
                reads.addAll(readerWaits[i]);
                writes.addAll(writerWaits[i]);
                heldTotal += heldNanos[i];
                holdCount += holds[i];
            }
            long[] r = reads.sorted();
            long[] w = writes.sorted();
            double elapsed = (t1 - t0) / 1e9;
            double rate = (c1 - c0) / elapsed;
            double meanHoldUs = holdCount == 0 ? Double.NaN : heldTotal / 1e3 / holdCount;
            double[] out = {
                rate,
                pct(r, 50) / 1e3, pct(r, 99) / 1e3,
                pct(w, 50) / 1e3, pct(w, 99) / 1e3,
                meanHoldUs,
            };
            log("read-mostly: %d sessions, %d ops in %.3fs = %.1f/s; %d reads, %d writes measured; "
                + "reader wait p50 %.0fus p99 %.0fus; writer wait p50 %.0fus p99 %.0fus; mean hold %.0fus",
                n, c1 - c0, elapsed, rate, r.length, w.length, out[1], out[2], out[3], out[4], out[5]);
            return out;
        } finally {
            stop.set(true);
            for (CuratorFramework c : clients) {
                c.close();
            }
        }
    }

    /**
     * The scale workload: for each N of BENCH_SCALE_WAITERS, N threads, one InterProcessMutex
     * each, all on one CuratorFramework and one path, queue behind a gate holder; then the whole
     * chain of handoffs is timed. Returns the scale_<N>_* fields (scale_<N>_error if a run could
     * not finish within BENCH_SCALE_TIMEOUT seconds, or failed).
     */
    static Map<String, Object> scale(String root) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        double timeoutS = Double.parseDouble(envOr("BENCH_SCALE_TIMEOUT", "300"));
        for (String w : envOr("BENCH_SCALE_WAITERS", "1000,5000,10000").split(",")) {
            if (w.trim().isEmpty()) {
                continue;
            }
            int n = Integer.parseInt(w.trim());
            log("scale: %d threads, one InterProcessMutex each, one client (max heap %d MB)...",
                n, Runtime.getRuntime().maxMemory() >> 20);
            ScaleRun run = new ScaleRun(root + "/scale-" + n, n, System.nanoTime() + nanos(timeoutS));
            try {
                run.chain();
                out.put("scale_" + n + "_handoffs_per_s", run.handoffsPerS);
                out.put("scale_" + n + "_peak_rss_mb", statusMb("VmHWM"));
                out.put("scale_" + n + "_queued_rss_mb", run.queuedRssMb);
                out.put("scale_" + n + "_watches", run.watches);
                out.put("scale_" + n + "_queue_s", run.queueS);
                out.put("scale_" + n + "_fifo", run.fifo);
                out.put("scale_" + n + "_overlaps", run.overlaps.get());
                log("scale %d: %.1f handoffs/s; peak RSS %.1f MB; FIFO %s; overlaps %d",
                    n, run.handoffsPerS, statusMb("VmHWM"), run.fifo, run.overlaps.get());
            } catch (Throwable t) {
                String why = t instanceof ScaleTimeout
                    ? String.format(Locale.ROOT, "timed out after %.0f s (BENCH_SCALE_TIMEOUT) %s",
                        timeoutS, t.getMessage())
                    : t.toString();
                log("scale %d: %s", n, why);
                out.put("scale_" + n + "_error", why);
                // Its threads may still wait on the client: no further N in this process.
                break;
            } finally {
                run.close();
            }
        }
        return out;
    }

    static final class ScaleTimeout extends Exception {
        ScaleTimeout(String what) {
            super(what);
        }
    }

    static final class ScaleRun {
        final String path;
        final int n;
        final long deadline;
        final AtomicInteger inside = new AtomicInteger(1); // the gate holder, until it releases
        final AtomicLong overlaps = new AtomicLong();
        final int[] order;
        final AtomicInteger granted = new AtomicInteger();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        CuratorFramework client;
        double handoffsPerS;
        double queuedRssMb;
        Long watches;
        double queueS;
        boolean fifo;

        ScaleRun(String path, int n, long deadline) {
            this.path = path;
            this.n = n;
            this.deadline = deadline;
            this.order = new int[n];
        }

        volatile int queued;

        long left() throws ScaleTimeout {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw timedOut();
            }
            return left;
        }

        ScaleTimeout timedOut() {
            return new ScaleTimeout(String.format(Locale.ROOT, "with %d of %d queued, %d handoffs done",
                queued, n, granted.get()));
        }

        void chain() throws Exception {
            client = newClient();
            InterProcessMutex gate = new InterProcessMutex(client, path);
            acquire(gate);
            // Each waiter's create has returned: the next thread starts only then, so the
            // creates reach the server in index order (Curator's threads race otherwise).
            Semaphore created = new Semaphore(0);
            StandardLockInternalsDriver driver = new StandardLockInternalsDriver() {
                @Override
                public String createsTheLock(CuratorFramework c, String p, byte[] bytes) throws Exception {
                    String ours = super.createsTheLock(c, p, bytes);
                    created.release();
                    return ours;
                }
            };
            CountDownLatch done = new CountDownLatch(n);
            long queueing = System.nanoTime();
            for (int i = 0; i < n; i++) {
                final int index = i;
                final InterProcessMutex mutex = new InterProcessMutex(client, path, driver);
                Thread t = new Thread(() -> {
                    try {
                        mutex.acquire();
                        try {
                            if (inside.incrementAndGet() != 1) {
                                overlaps.incrementAndGet();
                            }
                            order[granted.getAndIncrement()] = index;
                            Thread.yield(); // let any other thread run while this one holds
                            inside.decrementAndGet();
                        } finally {
                            mutex.release();
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    } finally {
                        done.countDown();
                    }
                }, "scale-" + i);
                t.setDaemon(true);
                t.start();
                if (!created.tryAcquire(left(), TimeUnit.NANOSECONDS)) {
                    throw timedOut();
                }
                queued = i + 1;
                if (failure.get() != null) {
                    throw new RuntimeException("waiter failed", failure.get());
                }
            }
            // Less the gate holder's node. Each queued waiter watches the node ahead: the cheap
            // watch count gates the listing of every ephemeral (megabytes of reply, ten times a
            // second, in the process measured).
            while (serverWatches() < n || (queued = queuedOnServer(path) - 1) < n) {
                left();
                Thread.sleep(100);
            }
            queueS = (System.nanoTime() - queueing) / 1e9;
            try {
                watches = settledWatches(deadline);
            } catch (Exception e) {
                log("scale %d: no watch count: %s", n, e);
            }
            queuedRssMb = statusMb("VmRSS");
            log("scale %d: queued in %.2f s; %s watches; RSS %.1f MB", n, queueS, watches, queuedRssMb);
            long t0 = System.nanoTime();
            inside.decrementAndGet();
            gate.release();
            if (!done.await(left(), TimeUnit.NANOSECONDS)) {
                throw timedOut();
            }
            double elapsed = (System.nanoTime() - t0) / 1e9;
            if (failure.get() != null) {
                throw new RuntimeException("waiter failed", failure.get());
            }
            handoffsPerS = n / elapsed;
            fifo = granted.get() == n;
            for (int i = 0; i < n && fifo; i++) {
                fifo = order[i] == i;
            }
        }

        void close() {
            if (client != null) {
                client.close();
            }
        }
    }

    /** A line of /proc/self/status (VmRSS, VmHWM), in MB. */
    static double statusMb(String field) {
        try {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith(field + ":")) {
                    return Long.parseLong(line.split("\\s+")[1]) / 1024.0;
                }
            }
        } catch (Exception e) {
            // no /proc: not Linux
        }
        return Double.NaN;
    }

    /** Sends a four-letter word to the first server of the connect string; returns its reply. */
    static String fourLetter(String word) throws Exception {
        String address = connect.split(",")[0].split("/")[0];
        int colon = address.lastIndexOf(':');
        try (Socket socket = new Socket(address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)))) {
            socket.setSoTimeout(10_000);
            OutputStream o = socket.getOutputStream();
            o.write(word.getBytes(StandardCharsets.US_ASCII));
            o.flush();
            InputStream in = socket.getInputStream();
            ByteArrayOutputStream reply = new ByteArrayOutputStream();
            byte[] buf = new byte[1 << 16];
            for (int r; (r = in.read(buf)) >= 0; ) {
                reply.write(buf, 0, r);
            }
            return reply.toString(StandardCharsets.UTF_8);
        }
    }

    /**
     * The lock nodes under {@code path} on the server: the ephemerals that {@code dump} lists
     * there (with a chroot the server names the full path: match the end).
     */
    static int queuedOnServer(String path) throws Exception {
        String prefix = path + "/";
        int count = 0;
        for (String line : fourLetter("dump").split("\n")) {
            String node = line.trim();
            int slash = node.lastIndexOf('/');
            if (slash >= 0 && (node.substring(0, slash) + "/").endsWith(prefix)) {
                count++;
            }
        }
        return count;
    }

    static long serverWatches() throws Exception {
        String reply = fourLetter("wchs");
        for (String line : reply.split("\n")) {
            if (line.startsWith("Total watches:")) {
                return Long.parseLong(line.substring("Total watches:".length()).trim());
            }
        }
        throw new IllegalStateException("no watch count in the wchs reply: " + reply);
    }

    /**
     * The watch count once it stops changing (three equal samples 200 ms apart, at most 30 s):
     * the waiters set their watches after their creates.
     */
    static long settledWatches(long deadline) throws Exception {
        long until = Math.min(System.nanoTime() + nanos(30), deadline);
        long last = serverWatches();
        int same = 1;
        while (same < 3 && System.nanoTime() < until) {
            Thread.sleep(200);
            long now = serverWatches();
            same = now == last ? same + 1 : 1;
            last = now;
        }
        return last;
    }

    /**
     * Which operations of the read-mostly workload write: splitmix64 from the session's index,
     * the same sequence in every impl (bench/src/main.rs, bench.py), one write in WRITE_ONE_IN.
     */
    static final class OpSequence {
        long state;

        OpSequence(int session) {
            state = session + 1L;
        }

        boolean nextIsWrite() {
            state += 0x9E3779B97F4A7C15L;
            long z = state;
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            return Long.remainderUnsigned(z ^ (z >>> 31), WRITE_ONE_IN) == 0;
        }
    }

    /** Workload 3: ns per nested acquire()+release() pair while already holding. Median of 5 measured rounds. */
    static double reentrant(CuratorFramework client, String path, long iters) throws Exception {
        InterProcessMutex mutex = new InterProcessMutex(client, path);
        acquire(mutex);
        try {
            // Warm-up: get the JIT (C2) through the reentrant path before timing it:
            // at least 3 rounds and at least BENCH_REENTRANT_WARMUP_SECONDS (default 2).
            double warm = Double.parseDouble(envOr("BENCH_REENTRANT_WARMUP_SECONDS", "2"));
            long warmEnd = System.nanoTime() + nanos(warm);
            for (int round = 0; round < 3 || System.nanoTime() < warmEnd; round++) {
                nested(mutex, iters);
            }
            int rounds = 5;
            double[] ns = new double[rounds];
            for (int round = 0; round < rounds; round++) {
                long t0 = System.nanoTime();
                nested(mutex, iters);
                ns[round] = (double) (System.nanoTime() - t0) / iters;
            }
            if (!mutex.isOwnedByCurrentThread()) {
                throw new IllegalStateException("lost ownership during reentrant loop");
            }
            double[] sorted = ns.clone();
            Arrays.sort(sorted);
            double median = sorted[rounds / 2];
            log("reentrant: %d pairs x %d rounds, ns/pair per round %s, median %.1f",
                iters, rounds, fmtArray(ns), median);
            return median;
        } finally {
            mutex.release();
        }
    }

    static void nested(InterProcessMutex mutex, long iters) throws Exception {
        for (long i = 0; i < iters; i++) {
            mutex.acquire(); // already held by this thread: count bump only, never blocks
            mutex.release();
        }
    }

    /**
     * Workload 4: raw create+delete on the same client, the create shaped like a lock node's
     * (EPHEMERAL_SEQUENTIAL, Curator-style name, 110 bytes of data). Returns cycles/s.
     */
    static double floor(CuratorFramework client, String path) throws Exception {
        String prefix = path + "/_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-lock-";
        byte[] data = new byte[110];
        client.create().creatingParentContainersIfNeeded().forPath(path);
        long warmEnd = System.nanoTime() + nanos(warmupSeconds);
        while (System.nanoTime() < warmEnd) {
            client.delete().forPath(client.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(prefix, data));
        }
        long start = System.nanoTime();
        long end = start + nanos(seconds);
        long now = start;
        long cycles = 0;
        while (now < end) {
            client.delete().forPath(client.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(prefix, data));
            cycles++;
            now = System.nanoTime();
        }
        double elapsed = (now - start) / 1e9;
        double rate = cycles / elapsed;
        log("floor: %d create+delete cycles in %.3fs = %.1f/s", cycles, elapsed, rate);
        return rate;
    }

    /**
     * The many_locks workload (issue 52): for each N of BENCH_MANY_PATHS, N distinct paths on one
     * CuratorFramework, a thread and an InterProcessMutex per path, each looping acquire and
     * release. First the memory of an idle held lock: N new mutexes acquired one by one (by this
     * thread: a mutex belongs to the thread that took it) and left idle, the RSS over that before,
     * per lock; then released and dropped, and what is left. Returns the many_<N>_* fields.
     */
    static Map<String, Object> manyLocks(CuratorFramework client, String root) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        int cap = Integer.parseInt(envOr("BENCH_MANY_THREAD_CAP", "10000"));
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        for (String item : envOr("BENCH_MANY_PATHS", "16,200,1000,10000").split(",")) {
            if (item.trim().isEmpty()) {
                continue;
            }
            int n = Integer.parseInt(item.trim());
            String prefix = "many_" + n + "_";
            if (n > cap) {
                out.put(prefix + "error", String.format(Locale.ROOT, "not run: a thread per path, capped at %,d (BENCH_MANY_THREAD_CAP)", cap));
                continue;
            }
            log("many_locks: %d paths, a thread and an InterProcessMutex each, one client...", n);
            System.gc();
            double before = statusMb("VmRSS");
            List<InterProcessMutex> held = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                InterProcessMutex mutex = new InterProcessMutex(client, root + "/held-" + n + "/p" + i);
                acquire(mutex);
                held.add(mutex);
            }
            double heldRss = statusMb("VmRSS");
            for (InterProcessMutex mutex : held) {
                mutex.release();
            }
            held = null;
            System.gc();
            Thread.sleep(200);
            double after = statusMb("VmRSS");

            AtomicBoolean measuring = new AtomicBoolean(false);
            AtomicBoolean stop = new AtomicBoolean(false);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            long[][] samples = new long[n][];
            AtomicInteger warmed = new AtomicInteger();
            int[] counts = new int[n];
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                final int index = i;
                InterProcessMutex mutex = new InterProcessMutex(client, root + "/many-" + n + "/p" + i);
                Thread t = new Thread(null, () -> {
                    long[] mine = new long[64];
                    int count = 0;
                    boolean first = true;
                    try {
                        while (!stop.get()) {
                            long t0 = System.nanoTime();
                            acquire(mutex);
                            long t1 = System.nanoTime();
                            mutex.release();
                            if (first) {
                                warmed.incrementAndGet();
                                first = false;
                            }
                            if (measuring.get()) { // the cycles that end in the measured phase
                                if (count == mine.length) {
                                    mine = Arrays.copyOf(mine, count * 2);
                                }
                                mine[count++] = t1 - t0;
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                    samples[index] = mine;
                    counts[index] = count;
                }, "many-" + i, 256 * 1024);
                threads.add(t);
                t.start();
            }
            // Until every thread has finished a cycle (with 10,000 paths one takes seconds), at least
            // the warm-up, at most 120 s.
            long warming = System.nanoTime();
            sleepSeconds(Math.max(warmupSeconds, 1));
            while (warmed.get() < n && System.nanoTime() - warming < nanos(120)) {
                Thread.sleep(50);
            }
            long cpu0 = os.getProcessCpuTime();
            long started = System.nanoTime();
            measuring.set(true);
            sleepSeconds(seconds);
            measuring.set(false);
            double elapsed = (System.nanoTime() - started) / 1e9;
            long cpu = os.getProcessCpuTime() - cpu0;
            stop.set(true);
            for (Thread t : threads) {
                t.join();
            }
            if (failure.get() != null) {
                throw new IllegalStateException("many_locks " + n + " failed", failure.get());
            }
            int total = 0;
            for (int c : counts) {
                total += c;
            }
            long[] all = new long[total];
            int at = 0;
            for (int i = 0; i < n; i++) {
                System.arraycopy(samples[i], 0, all, at, counts[i]);
                at += counts[i];
            }
            Arrays.sort(all);
            out.put(prefix + "cycles_per_s", total / elapsed);
            out.put(prefix + "acquire_p50_us", pct(all, 50) / 1e3);
            out.put(prefix + "acquire_p99_us", pct(all, 99) / 1e3);
            out.put(prefix + "cpu_us_per_cycle", total == 0 ? Double.NaN : cpu / 1e3 / total);
            out.put(prefix + "peak_rss_mb", statusMb("VmHWM"));
            out.put(prefix + "held_kb_per_lock", (heldRss - before) * 1024 / n);
            out.put(prefix + "kept_kb_per_lock", (after - before) * 1024 / n);
            log("many_locks %d: %.1f cycles/s", n, total / elapsed);
        }
        return out;
    }

    // ---------------------------------------------------------------- helpers

    static CuratorFramework newClient() throws InterruptedException {
        CuratorFramework c = CuratorFrameworkFactory.builder()
            .connectString(connect)
            .sessionTimeoutMs(SESSION_TIMEOUT_MS)
            .connectionTimeoutMs(CONNECTION_TIMEOUT_MS)
            .retryPolicy(new ExponentialBackoffRetry(1000, 3))
            .build();
        c.start();
        if (!c.blockUntilConnected(CONNECTION_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
            c.close();
            throw new IllegalStateException("could not connect to ZooKeeper at " + connect);
        }
        return c;
    }

    static void acquire(InterProcessMutex mutex) throws Exception {
        if (!mutex.acquire(ACQUIRE_TIMEOUT_S, TimeUnit.SECONDS)) {
            throw new IllegalStateException("acquire timed out after " + ACQUIRE_TIMEOUT_S + "s");
        }
    }

    /** Nearest-rank percentile of a sorted array, in its own unit. */
    static double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }

    /** Sleeps at least {@code nanos} (parkNanos may wake early). */
    static void sleepNanos(long nanos) {
        long end = System.nanoTime() + nanos;
        long left = nanos;
        while (left > 0) {
            LockSupport.parkNanos(left);
            left = end - System.nanoTime();
        }
    }

    static boolean wanted(List<String> workloads, String name) {
        return workloads.isEmpty() || workloads.contains(name);
    }

    static long nanos(double s) {
        return (long) (s * 1e9);
    }

    static void sleepSeconds(double s) throws InterruptedException {
        long end = System.nanoTime() + nanos(s);
        long left;
        while ((left = end - System.nanoTime()) > 0) {
            TimeUnit.NANOSECONDS.sleep(left);
        }
    }

    static void field(StringBuilder sb, String key, double v) {
        sb.append(",\"").append(key).append("\":");
        if (Double.isFinite(v)) {
            sb.append(String.format(Locale.ROOT, "%.1f", v));
        } else {
            sb.append("null");
        }
    }

    static String jsonString(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    static String fmtArray(double[] a) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < a.length; i++) {
            sb.append(i == 0 ? "" : ", ").append(String.format(Locale.ROOT, "%.1f", a[i]));
        }
        return sb.append(']').toString();
    }

    static String envOr(String name, String dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : v;
    }

    /** Joins the measured threads, then fails on a thread's error or a broken exclusion. */
    static void joinChecked(List<Thread> threads, AtomicReference<Throwable> failure, AtomicLong violations,
            String who, String exclusion) throws InterruptedException {
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(ACQUIRE_TIMEOUT_S + 10));
            if (t.isAlive()) {
                throw new IllegalStateException(t.getName() + " did not stop");
            }
        }
        if (failure.get() != null) {
            throw new RuntimeException(who + " failed", failure.get());
        }
        if (violations.get() != 0) {
            throw new IllegalStateException(exclusion + " violated " + violations.get() + " times");
        }
    }

    static void log(String fmt, Object... args) {
        System.err.println("[curator-bench] " + String.format(Locale.ROOT, fmt, args));
        System.err.flush();
    }

    /** Growable primitive long array (no boxing in the timed loop). */
    static final class LongList {
        long[] a = new long[1 << 14];
        int n;

        void add(long v) {
            if (n == a.length) {
                a = Arrays.copyOf(a, n * 2);
            }
            a[n++] = v;
        }

        void addAll(LongList other) {
            for (int i = 0; i < other.n; i++) {
                add(other.a[i]);
            }
        }

        long[] sorted() {
            long[] s = Arrays.copyOf(a, n);
            Arrays.sort(s);
            return s;
        }
    }
}
