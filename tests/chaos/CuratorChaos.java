// Chaos soak contender on Apache Curator (the orchestrator's fixed contender protocol), next to
// zklock's contenders: an InterProcessMutex on /chaos/mutex and, unless --curator-mutex-only, an
// InterProcessReadWriteLock on /chaos/rw (picked as the other contenders pick: mutex 1/2, read
// 1/4, write 1/4). Built against Curator 5.4 (language "curator", mutex only) and 5.7.1
// ("curator57", --lang curator57 --downgrade) by tests/chaos/prepare.
//
//   java -cp <curator classpath>:<dir of CuratorChaos.class> CuratorChaos \
//       --zk CONNECT --resource HOST:PORT --name NAME --seed N --session-timeout-ms MS [--curator-mutex-only]
//       [--lang LANG] [--downgrade] [--op-sleep-ms N] [--idle-ms N] [--sasl-digest USER:PASSWORD]
//
// --sasl-digest (the soak's servers require SASL): the ZooKeeper client authenticates every
// connection with SASL DIGEST-MD5 as USER, through the JAAS section "Client" (a DigestLoginModule
// with the username and password), as a Java user configures it; the configuration is set in
// this process (javax.security.auth.login.Configuration), not written to a file.
//
// --downgrade (Curator 5.5+, CURATOR-621): one write hold in 3 that is not pinned, after its
// writes, acquires the read lock while holding the write lock (a plain read node with the write
// node's sequence), says DOWNGRADE, releases the write lock, READs once or twice and ENDs; the
// hold keeps the write node's czxid as its token. (5.4 must not: its read node would queue behind
// the writers waiting, which could then take the lock while the read goes on.)
//
// One CuratorFramework (one session), one TCP connection to the fenced resource; loops until
// SIGTERM (then: close the client so its nodes go, exit 0). Exit 3 if the resource connection
// drops. Curator cannot cancel an acquisition, so the protocol's cancel branch is a timed
// acquire(delay). As Curator advises, a ConnectionState of SUSPENDED or LOST ends the hold: the
// holder must assume it no longer holds the lock.
//
// Threads: main (the loop), Curator's event thread (the connection state listener, which may
// send LOST), and the shutdown hook (SIGTERM). Lock order: STATE, then the socket (say/ask).

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

import javax.security.auth.login.AppConfigurationEntry;
import javax.security.auth.login.Configuration;

public final class CuratorChaos {
    private static final String MUTEX_PATH = "/chaos/mutex";
    private static final String RW_PATH = "/chaos/rw";
    private static final long PINNED_OP_INTERVAL_MS = 100;
    private static String lang = "curator";

    /** The sleep after an operation is uniform in [0, opSleepMs]; between iterations, in [0, idleMs]. */
    private static long opSleepMs = 30;
    private static long idleMs = 50;

    /** Guards the connection facts below and every Hold's flags. */
    private static final Object STATE = new Object();
    /** Counts SUSPENDED and LOST events: a hold is lost if it changes during the hold. */
    private static int suspensions;
    private static boolean connected;
    /** The hold in progress (after acquire returned), or null. */
    private static Hold current;

    private static Socket socket;
    private static OutputStream toResource;
    private static BufferedReader fromResource;

    private static volatile boolean stop;
    private static volatile boolean inAcquire;
    private static final CountDownLatch finished = new CountDownLatch(1);

    /** InterProcessMutex, with the path of this thread's own lock node visible. */
    private static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String ownNode() {
            return getLockPath();
        }
    }

    /** The read/write lock's sides, with the path of this thread's own lock node visible. */
    private static final class WriteSide extends InterProcessReadWriteLock.WriteLock {
        WriteSide(CuratorFramework client, String path, byte[] data) {
            super(client, path, data);
        }

        String ownNode() {
            return getLockPath();
        }
    }

    private static final class ReadSide extends InterProcessReadWriteLock.ReadLock {
        ReadSide(CuratorFramework client, String path, byte[] data, WriteSide write) {
            super(client, path, data, write);
        }

        String ownNode() {
            return getLockPath();
        }
    }

    /** One hold's reporting state: LOST at most once, only after BEGIN, never after END. */
    private static final class Hold {
        final String path;
        final long token;
        final int suspensionsAtAcquire;
        boolean begun;
        boolean ended;
        boolean lostSent;
        String lostReason;

        Hold(String path, long token, int suspensionsAtAcquire) {
            this.path = path;
            this.token = token;
            this.suspensionsAtAcquire = suspensionsAtAcquire;
        }

        /** With STATE held: whether lost (noting a suspension since acquire), reporting it. */
        boolean checkLost() {
            if (lostReason == null && (suspensions != suspensionsAtAcquire || !connected)) {
                lostReason = "SUSPENDED";
            }
            report();
            return lostReason != null;
        }

        /** With STATE held. */
        void report() {
            if (lostReason == null || !begun || ended || lostSent) {
                return;
            }
            lostSent = true;
            ask("LOST " + path + " " + token + " " + lostReason);
        }
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable e) {
            e.printStackTrace();
            Runtime.getRuntime().halt(2);
        }
    }

    private static void run(String[] args) throws Exception {
        String zk = null;
        String resource = null;
        String name = null;
        Long seed = null;
        int sessionMs = 0;
        boolean mutexOnly = false;
        boolean downgrade = false;
        String saslDigest = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--curator-mutex-only")) {
                mutexOnly = true;
                continue;
            }
            if (a.equals("--downgrade")) {
                downgrade = true;
                continue;
            }
            if (i + 1 >= args.length) {
                usage(a + " needs a value");
            }
            String v = args[++i];
            switch (a) {
                case "--zk": zk = v; break;
                case "--resource": resource = v; break;
                case "--name": name = v; break;
                case "--seed": seed = Long.parseLong(v); break;
                case "--session-timeout-ms": sessionMs = Integer.parseInt(v); break;
                case "--op-sleep-ms": opSleepMs = Long.parseLong(v); break;
                case "--idle-ms": idleMs = Long.parseLong(v); break;
                case "--lang": lang = v; break;
                case "--sasl-digest": saslDigest = v; break;
                default: usage("unknown argument " + a);
            }
        }
        if (zk == null || resource == null || name == null || seed == null || sessionMs <= 0) {
            usage("missing arguments");
        }
        if (opSleepMs < 0 || idleMs < 0) {
            usage("--op-sleep-ms and --idle-ms must be >= 0");
        }

        if (saslDigest != null) {
            int at = saslDigest.indexOf(':');
            if (at < 0) {
                usage("--sasl-digest wants USER:PASSWORD");
            }
            useSaslDigest(saslDigest.substring(0, at), saslDigest.substring(at + 1));
        }

        int colon = resource.lastIndexOf(':');
        socket = new Socket(resource.substring(0, colon), Integer.parseInt(resource.substring(colon + 1)));
        socket.setTcpNoDelay(true);
        toResource = socket.getOutputStream();
        fromResource = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.US_ASCII));

        final Thread mainThread = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop = true;
            if (inAcquire) {
                mainThread.interrupt(); // Curator's acquire gives up (and deletes its node) on interrupt
            }
            try {
                finished.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
            }
            Runtime.getRuntime().halt(0);
        }, "sigterm"));

        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(zk)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(Math.min(sessionMs, 5_000))
                .retryPolicy(new ExponentialBackoffRetry(100, 3))
                // the node data, as zklock's identity: the soak's census tells the nodes apart by it
                .defaultData(nodeData())
                .build();
        client.getConnectionStateListenable().addListener((c, state) -> {
            synchronized (STATE) {
                if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) {
                    suspensions++;
                    connected = false;
                    if (current != null && current.lostReason == null) {
                        current.lostReason = state.name();
                        current.report();
                    }
                } else if (state.isConnected()) {
                    connected = true;
                }
            }
        });
        client.start();
        while (!stop && !client.blockUntilConnected(1, TimeUnit.SECONDS)) {
            // keep waiting for the first session (the proxies may be stalled)
        }
        synchronized (STATE) {
            connected = client.getZookeeperClient().isConnected();
        }

        Mutex mutex = new Mutex(client, MUTEX_PATH);
        WriteSide write = new WriteSide(client, RW_PATH, nodeData());
        ReadSide read = new ReadSide(client, RW_PATH, nodeData(), write);
        SplittableRandom rng = new SplittableRandom(seed);
        while (!stop) {
            iteration(client, new Sides(mutex, read, write, mutexOnly, downgrade), rng, name);
        }
        try {
            client.close(); // ends the session: the server deletes its nodes at once
        } catch (Throwable ignored) {
        }
        try {
            socket.close();
        } catch (IOException ignored) {
        }
        finished.countDown();
        if (stop) {
            Thread.sleep(Long.MAX_VALUE); // the shutdown hook halts with status 0
        }
    }

    /**
     * The JAAS section "Client", which ZooKeeper's client reads for SASL: DIGEST-MD5 as user with
     * password. The client authenticates each connection (and defers every other request until
     * it has) once a section is there.
     */
    private static void useSaslDigest(String user, String password) {
        Map<String, String> options = new HashMap<>();
        options.put("username", user);
        options.put("password", password);
        AppConfigurationEntry[] client = {
            new AppConfigurationEntry("org.apache.zookeeper.server.auth.DigestLoginModule",
                    AppConfigurationEntry.LoginModuleControlFlag.REQUIRED, options)
        };
        Configuration.setConfiguration(new Configuration() {
            @Override
            public AppConfigurationEntry[] getAppConfigurationEntry(String name) {
                return "Client".equals(name) ? client : null;
            }
        });
    }

    /** The locks of this contender. */
    private static final class Sides {
        final Mutex mutex;
        final ReadSide read;
        final WriteSide write;
        final boolean mutexOnly;
        final boolean downgrade;

        Sides(Mutex mutex, ReadSide read, WriteSide write, boolean mutexOnly, boolean downgrade) {
            this.mutex = mutex;
            this.read = read;
            this.write = write;
            this.mutexOnly = mutexOnly;
            this.downgrade = downgrade;
        }
    }

    private static byte[] nodeData() {
        return ("{\"lang\":\"" + lang + "\"}").getBytes(StandardCharsets.UTF_8);
    }

    private static void iteration(CuratorFramework client, Sides sides, SplittableRandom rng, String name) {
        // 1. the target, as the other contenders pick it.
        int pick = sides.mutexOnly ? 0 : rng.nextInt(100);
        String mode = pick < 50 ? "x" : pick < 75 ? "r" : "w";
        String path = mode.equals("x") ? MUTEX_PATH : RW_PATH;
        InterProcessMutex lock = mode.equals("x") ? sides.mutex : mode.equals("r") ? sides.read : sides.write;
        // 2. how to wait: Curator's acquire(time) is its only way to give up.
        int how = rng.nextInt(100);
        long waitMs = how < 70 ? uniform(rng, 200, 3000) : how < 85 ? uniform(rng, 0, 1000) : 0;
        String outcome;
        boolean held = false;
        long started = System.nanoTime();
        try {
            inAcquire = true;
            held = !stop && lock.acquire(waitMs, TimeUnit.MILLISECONDS);
            outcome = held ? "held" : stop ? "cancelled" : waitMs == 0 ? "busy" : "timeout";
        } catch (InterruptedException e) {
            outcome = "cancelled";
        } catch (Exception e) {
            outcome = "error:" + kind(e);
        } finally {
            inAcquire = false;
            Thread.interrupted(); // an interrupt that came late must not fail the calls below
        }
        // The connection facts as acquire returned: a suspension from here on ends the hold.
        int suspensionsAtAcquire;
        boolean connectedAtAcquire;
        synchronized (STATE) {
            suspensionsAtAcquire = suspensions;
            connectedAtAcquire = connected;
        }
        long waited = (System.nanoTime() - started) / 1_000_000;
        say("WAIT " + path + " " + mode + " " + waited + " " + outcome);

        if (held) {
            // 4. the token: czxid of this holder's own node (for the mutex, the first participant)
            long token = -1;
            try {
                String own = mode.equals("x") ? sides.mutex.ownNode()
                        : mode.equals("r") ? sides.read.ownNode() : sides.write.ownNode();
                if (mode.equals("x")) {
                    Collection<String> nodes = sides.mutex.getParticipantNodes();
                    String first = nodes.isEmpty() ? null : nodes.iterator().next();
                    if (first == null || !first.equals(own)) {
                        own = null;
                    }
                }
                if (own != null) {
                    Stat stat = client.checkExists().forPath(own);
                    if (stat != null) {
                        token = stat.getCzxid();
                    }
                }
                if (token < 0) {
                    say("ERROR OwnNodeNotFirst"); // not (or no longer) the holder: a lost hold
                    nap(100);
                }
            } catch (Exception e) {
                say("ERROR " + kind(e));
                nap(100);
            }
            Hold hold = null;
            if (token >= 0) {
                String reply;
                long begunAt;
                synchronized (STATE) {
                    hold = new Hold(path, token, suspensionsAtAcquire);
                    if (!connectedAtAcquire) {
                        hold.lostReason = "SUSPENDED";
                    }
                    reply = ask("BEGIN " + path + " " + mode + " " + token + " " + lang + " " + name);
                    begunAt = System.nanoTime();
                    hold.begun = true;
                    current = hold;
                    hold.checkLost(); // lost before BEGIN was acknowledged
                }
                String op = (mode.equals("r") ? "READ " : "WRITE ") + path + " " + token;
                long pinMs = pinMs(reply);
                boolean downgrade = sides.downgrade && mode.equals("w") && pinMs == 0 && rng.nextInt(3) == 0;
                if (pinMs > 0) {
                    // Pinned: hold for pinMs from the reply, one operation every 100 ms (the
                    // orchestrator stalls or cuts this contender meanwhile). The state listener
                    // reports SUSPENDED/LOST even while this sleeps.
                    long until = begunAt + pinMs * 1_000_000;
                    for (long nextOp = System.nanoTime(); !stop && System.nanoTime() - until < 0; ) {
                        synchronized (STATE) {
                            if (hold.checkLost()) {
                                break;
                            }
                        }
                        ask(op);
                        nextOp += PINNED_OP_INTERVAL_MS * 1_000_000;
                        long wake = nextOp - until < 0 ? nextOp : until;
                        nap((wake - System.nanoTime()) / 1_000_000);
                    }
                } else {
                    int ops = (int) uniform(rng, 1, 3);
                    for (int i = 0; i < ops && !stop; i++) {
                        synchronized (STATE) {
                            if (hold.checkLost()) {
                                break;
                            }
                        }
                        ask(op);
                        nap(uniform(rng, 0, opSleepMs));
                    }
                }
                if (downgrade && !stop) {
                    lock = downgrade(sides, hold, rng);
                }
                synchronized (STATE) {
                    if (!hold.checkLost()) {
                        hold.ended = true;
                        ask("END " + path + " " + token);
                    }
                    current = null;
                }
            }
            // After END (or LOST): give the lock back. Errors are expected once lost.
            release(lock, hold);
        } else if (outcome.startsWith("error:")) {
            nap(100);
        }
        // 6.
        nap(uniform(rng, 0, idleMs));
    }

    /**
     * The downgrade of a write hold (Curator 5.5+): the read lock while holding the write lock,
     * DOWNGRADE, the write lock released, a READ or two. Returns the lock still held.
     */
    private static InterProcessMutex downgrade(Sides sides, Hold hold, SplittableRandom rng) {
        boolean got;
        try {
            got = sides.read.acquire(3, TimeUnit.SECONDS);
        } catch (Exception e) {
            say("ERROR downgrade:" + kind(e));
            return sides.write;
        } finally {
            Thread.interrupted();
        }
        if (!got) {
            say("ERROR downgrade:timeout");
            return sides.write;
        }
        synchronized (STATE) {
            if (!hold.checkLost()) {
                ask("DOWNGRADE " + hold.path + " " + hold.token);
            }
        }
        release(sides.write, hold);
        int ops = (int) uniform(rng, 1, 2);
        for (int i = 0; i < ops && !stop; i++) {
            synchronized (STATE) {
                if (hold.checkLost()) {
                    break;
                }
            }
            ask("READ " + hold.path + " " + hold.token);
            nap(uniform(rng, 0, opSleepMs));
        }
        return sides.read;
    }

    /** Releases one level of `lock`; an error is reported unless the hold is known lost. */
    private static void release(InterProcessMutex lock, Hold hold) {
        try {
            lock.release();
        } catch (Exception e) {
            boolean lost;
            synchronized (STATE) {
                lost = hold == null || hold.lostReason != null;
            }
            if (!lost) {
                say("ERROR " + kind(e));
                nap(100);
            }
        }
    }

    /** The ms of a BEGIN reply "OK PIN <ms>", or 0 for a plain "OK". */
    private static long pinMs(String reply) {
        String[] words = reply.split(" ");
        return words.length == 3 && words[0].equals("OK") && words[1].equals("PIN") ? Long.parseLong(words[2]) : 0;
    }

    private static long uniform(SplittableRandom rng, long lo, long hi) {
        return rng.nextLong(lo, hi + 1);
    }

    private static String kind(Throwable e) {
        return e.getClass().getSimpleName();
    }

    private static void nap(long ms) {
        if (stop || ms <= 0) {
            return;
        }
        try {
            Thread.sleep(ms);
        } catch (InterruptedException ignored) {
            // SIGTERM: the loop sees stop
        }
    }

    /** Sends a line that has no reply. */
    private static void say(String line) {
        synchronized (CuratorChaos.class) {
            send(line);
        }
    }

    /** Sends a line and reads its one-line reply. */
    private static String ask(String line) {
        synchronized (CuratorChaos.class) {
            send(line);
            try {
                String reply = fromResource.readLine();
                if (reply == null) {
                    gone("closed");
                }
                return reply;
            } catch (IOException e) {
                gone("dropped (" + e + ")");
                return null;
            }
        }
    }

    private static void send(String line) {
        try {
            toResource.write((line + "\n").getBytes(StandardCharsets.US_ASCII));
            toResource.flush();
        } catch (IOException e) {
            gone("dropped (" + e + ")");
        }
    }

    private static void gone(String what) {
        System.err.println("contender-curator: resource connection " + what);
        Runtime.getRuntime().halt(3);
    }

    private static void usage(String why) {
        System.err.println("CuratorChaos: " + why + "\nusage: CuratorChaos --zk CONNECT --resource HOST:PORT --name NAME "
                + "--seed N --session-timeout-ms MS [--curator-mutex-only] [--lang LANG] [--downgrade] [--op-sleep-ms N] [--idle-ms N]"
                + " [--sasl-digest USER:PASSWORD]");
        System.exit(2);
    }
}
