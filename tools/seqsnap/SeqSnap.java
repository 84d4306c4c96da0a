// SeqSnap: writes a ZooKeeper snapshot whose lock parent is close to the 32-bit sequence limit.
//
// Usage: java -cp <zookeeper classpath>:<dir of SeqSnap.class> SeqSnap <dataDir> <path> <cversion>
//
// Creates <dataDir>/version-2/snapshot.<zxid> holding the persistent znode <path> (and its missing
// ancestors) whose *persisted* child version (StatPersisted.cversion) is <cversion>. ZooKeeper derives
// the suffix of the next SEQUENTIAL child from that persisted counter, so with <cversion> = 2147483640
// the next sequential children of <path> are ...2147483640, ...2147483641, and so on up to the
// signed 32-bit limit (2147483647) and past it. (The cversion a client sees in a Stat is computed
// from the persisted one as 2*cversion - numChildren, so it differs.)
//
// The snapshot is written without a digest; start the server with -Dzookeeper.digest.enabled=false.
// Every server of an ensemble can be seeded with the same snapshot (same zxid, same tree).
// Compiled and run by `scripts/zk seed-seq`, against the jars of the server it seeds for (a cache
// per version): Debian 12's ZooKeeper 3.8, or 3.9.3 from Debian 13 (ZK_SERVER_VERSION=3.9,
// scripts/field). The same source compiles against both, and both read the snapshot it writes.

import java.io.File;
import java.util.Collections;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.server.DataNode;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.persistence.FileTxnSnapLog;

public final class SeqSnap {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: SeqSnap <dataDir> <path> <cversion>");
            System.exit(2);
        }
        File dataDir = new File(args[0]);
        String path = args[1];
        int cversion = Integer.parseInt(args[2]);
        if (!path.startsWith("/") || path.endsWith("/") || path.contains("//") || path.startsWith("/zookeeper")) {
            System.err.println("SeqSnap: bad path " + path);
            System.exit(2);
        }
        // The snapshot must not carry a digest that no longer matches the tree we tamper with.
        System.setProperty("zookeeper.digest.enabled", "false");

        File version2 = new File(dataDir, "version-2");
        File[] existing = version2.listFiles();
        if (existing != null && existing.length > 0) {
            System.err.println("SeqSnap: " + version2 + " is not empty; seed a fresh dataDir");
            System.exit(1);
        }

        DataTree tree = new DataTree();
        long zxid = 0;
        long now = System.currentTimeMillis();
        StringBuilder prefix = new StringBuilder();
        for (String part : path.substring(1).split("/")) {
            prefix.append('/').append(part);
            String p = prefix.toString();
            if (tree.getNode(p) == null) {
                zxid++;
                // ephemeralOwner 0 = persistent; parentCVersion -1 = bump the parent's counter as usual.
                tree.createNode(p, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, 0L, -1, zxid, now);
            }
        }
        DataNode node = tree.getNode(path);
        node.stat.setCversion(cversion);
        tree.lastProcessedZxid = zxid;

        FileTxnSnapLog snapLog = new FileTxnSnapLog(dataDir, dataDir);
        snapLog.save(tree, new ConcurrentHashMap<Long, Integer>(), true);
        snapLog.close();
        System.out.println("SeqSnap: wrote " + new File(version2, "snapshot." + Long.toHexString(zxid))
                + " with " + path + " persisted cversion " + node.stat.getCversion());
    }
}
