// CuratorContender: one Apache Curator lock (an InterProcessMutex, an InterProcessReadWriteLock, or
// an InterProcessSemaphoreV2), driven line by line over stdin/stdout, so zklock's interop tests can make Curator and zklock
// contend for the same lock.
//
// Usage: java -cp <curator classpath>:<dir of CuratorContender.class> CuratorContender \
//            <connectString> <lockPath> <name> [mutex|read|write|semaphore:<maxLeases>]
//
// One CuratorFramework (session timeout $CURATOR_SESSION_TIMEOUT_MS, default 10000 ms; connection
// timeout $CURATOR_CONNECTION_TIMEOUT_MS, default 15000 ms; ExponentialBackoffRetry(100 ms, 10
// retries, at most 2 s apart)) and one lock on <lockPath>: an InterProcessMutex (mutex, the
// default), or one InterProcessReadWriteLock (read or write: which of its sides the plain
// acquire and release take; both sides are there, for a downgrade), or an InterProcessSemaphoreV2
// with that many max leases (semaphore:N: acquire takes one lease, release returns the oldest one
// held, nodes lists the lease nodes, getParticipantNodes()). Once connected it prints
//   READY <name> <sessionIdHex>
// then reads commands, one per line, and answers each with exactly one line on stdout (flushed):
//   acquire  -> lock.acquire() (blocks; reentrant), then  ACQUIRED <name> <epochMicros>
//   release  -> lock.release(),                      then  RELEASED <name> <epochMicros>
//               (ACQUIRED's time is taken right after acquire() returned, RELEASED's right
//               before release() was called: the critical section in between, so the intervals
//               of contenders that exclude each other never overlap; RELEASED is printed once
//               release() has returned, i.e. the server has deleted the node)
//   acquire read, acquire write, release read, release write
//            -> the same on that side of the read/write lock (a read/write contender only)
//   downgrade -> (a read/write contender holding the write side) readLock().acquire(), then
//               writeLock().release(), then  DOWNGRADED <name> <epochMicros>  (the time taken
//               right before the write side's release(): the end of the exclusive section; the
//               read side is held from before it). Curator 5.4 makes a fresh sequential read
//               node for that read; Curator 5.5+ (CURATOR-621) a plain one with the write node's
//               sequence. End the read with release read.
//   nodes    -> NODES <comma-separated participant nodes>  (full paths, in queue order, the
//               holder first; empty if <lockPath> does not exist): getParticipantNodes() of the
//               mutex; for read/write, that of both sides (Curator gives each side's own nodes
//               only) merged in sequence order; for a semaphore, the names of its lease nodes
//               (getParticipantNodes(): the children of <lockPath>/leases, as the server lists them)
//   quit     -> closes the client (its session: its lock nodes vanish) and exits 0
// stdin EOF (the test process is gone) does the same as quit. Any exception: one line
//   ERROR <acquire|release|downgrade|nodes|...>: <exception>
// (the command's first word) and it goes on. acquire, release and downgrade run in order on one
// worker thread (Curator's locks belong to the thread that acquired them), so a release sent
// while an acquire blocks waits for it; nodes and quit are handled at once, even while an
// acquire blocks (so a NODES line can come before the ACQUIRED line of an earlier acquire).
//
// Nothing else is written to stdout: System.out is redirected to stderr, Curator's and ZooKeeper's
// logging goes to slf4j-nop, and the JVM's own logging must be sent to stderr by the launcher
// (-Xlog:all=warning:stderr). Built by zklock-testkit (tests/testkit/src/curator.rs) against
// Debian's libcurator-recipes-java (Curator 5.4) and ZooKeeper 3.8 jars, or against Curator 5.7.1
// and ZooKeeper 3.9.3's client from Debian 13 (CuratorVersion::V5_7, scripts/field curator 5.7):
// the same source compiles against both.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;

public final class CuratorContender {
    private static PrintStream out;
    private static volatile boolean quitting;

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        final String kind = args.length == 4 ? args[3] : "mutex";
        final boolean isSemaphore = kind.matches("semaphore:[1-9][0-9]*");
        if ((args.length != 3 && args.length != 4) || !(List.of("mutex", "read", "write").contains(kind) || isSemaphore)) {
            System.err.println(
                    "usage: CuratorContender <connectString> <lockPath> <name> [mutex|read|write|semaphore:<maxLeases>]");
            System.exit(2);
        }
        final String connect = args[0];
        final String path = args[1];
        final String name = args[2];
        int sessionMs = envInt("CURATOR_SESSION_TIMEOUT_MS", 10_000);
        int connectionMs = envInt("CURATOR_CONNECTION_TIMEOUT_MS", 15_000);

        final CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(connectionMs)
                .retryPolicy(new ExponentialBackoffRetry(100, 10, 2_000))
                .build();
        client.start();
        if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
            say("ERROR connect: not connected to " + connect + " after 60s");
            halt(client, 1);
        }
        long sessionId = client.getZookeeperClient().getZooKeeper().getSessionId();
        final InterProcessSemaphoreV2 semaphore = isSemaphore
                ? new InterProcessSemaphoreV2(client, path, Integer.parseInt(kind.substring("semaphore:".length())))
                : null;
        final java.util.ArrayDeque<Lease> leases = new java.util.ArrayDeque<>();
        final InterProcessReadWriteLock readWrite =
                kind.equals("mutex") || isSemaphore ? null : new InterProcessReadWriteLock(client, path);
        final InterProcessMutex lock = isSemaphore
                ? null
                : readWrite == null
                        ? new InterProcessMutex(client, path)
                        : kind.equals("read") ? readWrite.readLock() : readWrite.writeLock();
        say("READY " + name + " " + Long.toHexString(sessionId));

        ExecutorService worker = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "contender-worker");
            t.setDaemon(true);
            return t;
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            final String cmd = line.trim();
            if (cmd.isEmpty()) {
                continue;
            }
            final String[] words = cmd.split("\\s+");
            final String verb = words[0];
            if (words.length > 2 || (words.length == 2 && !List.of("acquire", "release").contains(verb))) {
                say("ERROR " + verb + ": bad command '" + cmd + "'");
                continue;
            }
            final InterProcessMutex side;
            if (words.length == 1) {
                side = lock;
            } else if (readWrite == null) {
                say("ERROR " + verb + ": '" + cmd + "' needs a read/write contender");
                continue;
            } else if (words[1].equals("read")) {
                side = readWrite.readLock();
            } else if (words[1].equals("write")) {
                side = readWrite.writeLock();
            } else {
                say("ERROR " + verb + ": no side '" + words[1] + "' (read, write)");
                continue;
            }
            switch (verb) {
                case "acquire":
                    worker.execute(() -> {
                        try {
                            if (semaphore != null) {
                                leases.add(semaphore.acquire());
                            } else {
                                side.acquire();
                            }
                            say("ACQUIRED " + name + " " + epochMicros());
                        } catch (Throwable e) {
                            error(verb, e);
                        }
                    });
                    break;
                case "release":
                    worker.execute(() -> {
                        try {
                            if (semaphore != null && leases.isEmpty()) {
                                throw new IllegalStateException("no lease held");
                            }
                            long leaving = epochMicros(); // the critical section ends here
                            if (semaphore != null) {
                                leases.poll().close();
                            } else {
                                side.release();
                            }
                            say("RELEASED " + name + " " + leaving);
                        } catch (Throwable e) {
                            error(verb, e);
                        }
                    });
                    break;
                case "downgrade":
                    worker.execute(() -> {
                        try {
                            if (readWrite == null) {
                                throw new IllegalStateException("not a read/write contender");
                            }
                            if (!readWrite.writeLock().isOwnedByCurrentThread()) {
                                throw new IllegalMonitorStateException("the write side is not held");
                            }
                            readWrite.readLock().acquire(); // under the write hold: at once
                            long leaving = epochMicros(); // the exclusive section ends here
                            readWrite.writeLock().release();
                            say("DOWNGRADED " + name + " " + leaving);
                        } catch (Throwable e) {
                            error(verb, e);
                        }
                    });
                    break;
                case "nodes":
                    try {
                        Collection<String> nodes;
                        try {
                            nodes = semaphore != null
                                    ? semaphore.getParticipantNodes()
                                    : readWrite == null ? lock.getParticipantNodes() : participants(readWrite);
                        } catch (KeeperException.NoNodeException e) {
                            nodes = java.util.Collections.emptyList();
                        }
                        say("NODES " + String.join(",", nodes));
                    } catch (Throwable e) {
                        error(verb, e);
                    }
                    break;
                case "quit":
                    halt(client, 0);
                    break;
                default:
                    say("ERROR " + verb + ": unknown command (acquire, release, downgrade, nodes, quit)");
            }
        }
        halt(client, 0); // stdin EOF: whoever drove us is gone
    }

    /**
     * Every node of a read/write lock in queue order. Each side's getParticipantNodes() keeps only
     * its own nodes; merged by the sequence after the marker, as Curator's sorting driver orders
     * them.
     */
    private static List<String> participants(InterProcessReadWriteLock readWrite) throws Exception {
        List<String> nodes = new ArrayList<>(readWrite.readLock().getParticipantNodes());
        nodes.addAll(readWrite.writeLock().getParticipantNodes());
        nodes.sort(Comparator.comparing(CuratorContender::sequenceOf));
        return nodes;
    }

    private static String sequenceOf(String node) {
        int at = Math.max(node.lastIndexOf("__READ__"), node.lastIndexOf("__WRIT__"));
        return at < 0 ? node : node.substring(at + "__READ__".length());
    }

    /** Closes the client (at most 5 s) and exits with status {@code code}. */
    private static void halt(CuratorFramework client, int code) {
        quitting = true;
        Thread timer = new Thread(() -> {
            try {
                Thread.sleep(5_000);
            } catch (InterruptedException ignored) {
            }
            Runtime.getRuntime().halt(code);
        });
        timer.setDaemon(true);
        timer.start();
        try {
            client.close();
        } catch (Throwable ignored) {
        }
        out.flush();
        Runtime.getRuntime().halt(code);
    }

    private static long epochMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    private static void error(String cmd, Throwable e) {
        if (quitting) {
            return; // the client is being closed under a blocked acquire
        }
        say("ERROR " + cmd + ": " + e);
    }

    private static synchronized void say(String line) {
        out.println(line.replace('\n', ' ').replace('\r', ' '));
        out.flush();
    }

    private static int envInt(String key, int dflt) {
        String v = System.getenv(key);
        return v == null || v.trim().isEmpty() ? dflt : Integer.parseInt(v.trim());
    }
}
