// locktest adapter: three ZooKeeper locks of the JVM, used as their documentation says, defaults
// kept, against Debian's jars (Curator 5.4.0, ZooKeeper 3.8.0). The first argument picks the lock:
//
//   curator-mutex  Curator's InterProcessMutex: one per lock path, reused; acquire(time, unit) and
//                  release() on one thread (it is reentrant per thread). Its nodes are created in
//                  protected mode (a "_c_<uuid>-" name that finds a create whose reply was lost).
//   leader-latch   Curator's LeaderLatch as a leadership lock: a latch started per acquire,
//                  await(time, unit), leader = holder; release closes it. Its listener's notLeader
//                  (and hasLeadership turning false) tell the loss.
//   writelock      ZooKeeper's own recipe (org.apache.zookeeper.recipes.lock.WriteLock) on a plain
//                  ZooKeeper handle: lock(), then its LockListener's lockAcquired; unlock().
//
// curator-mutex --fix=604 applies the same check to InterProcessMutex's grant (CURATOR-604, open
// upstream, has no fix of its own): a grant on a node that is not the current session's is let go
// (release() deletes that node) and the acquire goes on for the time left.
//
// writelock --fix=26 looks again when the node WriteLock was to watch is gone (shayhatsor/zookeeper#26:
// lock() lists the children, then calls exists with a watch on the node before its own; if that node
// was deleted in between, exists leaves a watch for its creation, which never comes, and lock() returns
// false for good). When lock() returns false and that node (WriteLock's private lastChildId, by
// reflection) no longer exists, the adapter calls lock() again, which lists the children anew: what
// kazoo's lock does since kazoo pull request 490. A node that exists when checked existed when lock()
// watched it (sequential names are not reused), so its watch stands.
//
// leader-latch --fix=500 applies Curator pull request 500 (CURATOR-696, in Curator 5.7.0) to the
// installed LeaderLatch: a latch whose node is first in line takes the leadership only if the node is
// its current session's (its ephemeralOwner); a node of an earlier session makes it reset (delete
// that node, create another). The fix is inside LeaderLatch's private checkLeadership; the adapter
// checks the same when await returns and calls the latch's own reset() (package-private: by
// reflection) as the fix does, then waits on.
//
// As it starts, the adapter warms up: on a thread of its own, it takes and lets go a lock of the same
// recipe at a path beside LOCKTEST_PREFIX (PREFIX-warm-up-CLIENT-PID, outside the prefix, which is where
// locktest's observer looks), reads its grant as an acquire does, and deletes that path: the JVM's
// cold first grant (its class loading and compiling) is then part of the start locktest waits for,
// not of the first acquire, whose time counts against the lock.
//
// The session timeout is LOCKTEST_TTL (a ZooKeeper session is the lock's lease). Curator's retry
// policy is the one its getting-started page shows (ExponentialBackoffRetry(1000, 3)).
// token: the czxid of the node the grant holds (a read of the node's Stat after the grant: the
// queue's order is its nodes' creation order, so it grows with every grant). key: that node.
// revision: the pzxid of a listing of the lock's children, read next, that shows the node first in
// line (the state the grant is confirmed on). A grant whose node is not first by then is still the
// library's grant, answered as such without a revision, and one whose node is gone without a token
// either: the adapter tells what the library did, and locktest judges it (its own reads bound the
// decision). These two reads are the adapter's, not the libraries': none of them tells its node's
// zxids.
// session: the id of the session the client is on when it answers (read after the node's Stat), which
// locktest holds the node to belong to: a grant on a node of an earlier session (CURATOR-696, CURATOR-604)
// breaks the contract check's promise 8.
// lost: Curator's connection state LOST (the session is gone or taken for gone), the latch's
// notLeader; for the plain handle, the session's Expired event.
//
// locktest compiles this file with javac (lock/execlock: java.go) and runs it on the classpath given:
//   java -cp /usr/share/java/curator-recipes.jar:/usr/share/java/zookeeper-recipes-lock.jar:/usr/share/java/slf4j-simple.jar ZkLocks.java MODE
// (the jars' manifests name the rest; slf4j-simple writes the libraries' logs to stderr, the client's log).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;
import org.apache.zookeeper.recipes.lock.LockListener;
import org.apache.zookeeper.recipes.lock.WriteLock;

public class ZkLocks {
    static final PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    static final String endpoints = System.getenv().getOrDefault("LOCKTEST_ENDPOINTS", "127.0.0.1:2181");
    static final String prefix = System.getenv().getOrDefault("LOCKTEST_PREFIX", "/locktest/").replaceAll("/+$", "") + "/";
    static final int ttlMs = 1000 * Integer.parseInt(System.getenv().getOrDefault("LOCKTEST_TTL", "5"));

    /** An operation that failed; definite says it surely had no effect. */
    static class Fail extends Exception {
        private static final long serialVersionUID = 1L;
        final boolean definite;

        Fail(String msg, boolean definite) {
            super(msg);
            this.definite = definite;
        }
    }

    /** A grant: its node, the node's czxid, and the zxid of a state in which the node was first in line. */
    record Grant(String node, long czxid, long decided, long session, long owner) {
        /** The node is the session's the grant is told on (owner: its ephemeralOwner, 0 if gone). */
        boolean own() {
            return owner != 0 && owner == session;
        }
    }

    /** One of the three locks. */
    interface Lock {
        Grant acquire(String name, long timeoutMs) throws Exception;

        void release(String name) throws Exception;

        /** Ends the session: what it holds or waits for is given up at once. */
        void close() throws Exception;

        /**
         * Takes and lets go a lock of the recipe at path, reads its grant as acquire does, then deletes
         * path: the warm-up (warmUp). None of the lock's state (held, lost) is touched.
         */
        void warm(String path) throws Exception;
    }

    /** The lost event, from any thread: whole lines. */
    static synchronized void emit(String line) {
        out.print(line + "\n");
        out.flush();
    }

    static void lost(String name) {
        emit("{\"event\":\"lost\",\"lock\":" + quote(name) + "}");
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "";
        Lock lk = switch (mode) {
            case "curator-mutex" -> new Mutex(curator(), java.util.Arrays.asList(args).contains("--fix=604"));
            case "leader-latch" -> new Latch(curator(), java.util.Arrays.asList(args).contains("--fix=500"));
            case "writelock" -> new Write(java.util.Arrays.asList(args).contains("--fix=26"));
            default -> {
                System.err.println("usage: ZkLocks curator-mutex [--fix=604]|leader-latch [--fix=500]|writelock [--fix=26]");
                System.exit(2);
                yield null;
            }
        };
        Thread warm = warmUp(() -> {
            lk.warm(warmPath());
            return null;
        });
        serve(lk);
        warm.join(); // its lock path deleted first (locktest kills a client slow to exit)
        lk.close(); // stdin closed: locktest is done with this client
        System.exit(0); // Curator's and ZooKeeper's threads are not daemons
    }

    /**
     * A started Curator client, as newClient makes it (session timeout the TTL, connection timeout 15 s,
     * the retry policy of Curator's getting-started page), but for one default: its EnsembleTracker is
     * off. Curator reads the servers' own addresses from their configuration (/zookeeper/config) and
     * moves its connection to them, past the links locktest gives (LOCKTEST_ENDPOINTS, through
     * toxiproxy): a client behind a proxy or NAT must turn it off too, and locktest's faults act only
     * on those links. It connects in the background: the adapter reads its first request at once.
     */
    static CuratorFramework curator() {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(endpoints).sessionTimeoutMs(ttlMs)
                .connectionTimeoutMs(15000).retryPolicy(new ExponentialBackoffRetry(1000, 3)).ensembleTracker(false).build();
        c.start();
        return c;
    }

    /**
     * Runs a grant of the lock's recipe (Lock.warm) on a thread of its own as the client starts: the JVM
     * loads and compiles the recipe's code then, while locktest waits for the client to settle (a busy
     * process is not yet up), rather than in the first acquire, whose time counts against the lock (a
     * cold first acquire cost 3-22 times a warm one, and on a loaded machine outlasted the op timeout).
     * It does not hold up the reading of requests: one blocked on unreachable servers is idle, and taken
     * to be up.
     */
    static Thread warmUp(java.util.concurrent.Callable<?> work) {
        Thread t = new Thread(() -> {
            try {
                work.call();
            } catch (Exception e) {
                System.err.println("ZkLocks: warm-up: " + e);
            }
        }, "warm-up");
        t.setDaemon(true);
        t.start();
        return t;
    }

    /**
     * The warm-up's lock path: beside LOCKTEST_PREFIX, not under it, where locktest's observer looks for
     * the run's locks; the client's name and pid keep it the process's own.
     */
    static String warmPath() {
        String base = prefix.equals("/") ? "/locktest" : prefix.substring(0, prefix.length() - 1);
        return base + "-warm-up-" + System.getenv().getOrDefault("LOCKTEST_CLIENT", "c0") + "-" + ProcessHandle.current().pid();
    }

    /**
     * The grant of node, read after the library granted it: the node's Stat (czxid, the token), then
     * its lock's children with their parent's Stat. The parent's pzxid is the zxid of the last change
     * of the children, so the listing is the state at that zxid: node first in line there is the
     * grant's decision revision. A node gone (czxid 0) or not first (decided 0) is still the
     * library's grant: the reads confirm nothing of it.
     */
    static Grant confirm(String node, Stat st, List<String> children, Stat parent, long session) {
        if (st == null) {
            return new Grant(node, 0, 0, session, 0);
        }
        String name = node.substring(node.lastIndexOf('/') + 1);
        String first = children.stream().min(Comparator.comparing(ZkLocks::sequence)).orElse("");
        return new Grant(node, st.getCzxid(), first.equals(name) ? parent.getPzxid() : 0, session, st.getEphemeralOwner());
    }

    /** A sequential node's sequence number: the last 10 digits of its name. */
    static String sequence(String name) {
        return name.substring(Math.max(0, name.length() - 10));
    }

    static Grant confirm(CuratorFramework c, String node) throws Exception {
        Stat st = c.checkExists().forPath(node);
        long session = c.getZookeeperClient().getZooKeeper().getSessionId();
        if (st != null && st.getEphemeralOwner() != session) { // what CURATOR-604 and CURATOR-696 grant on: said, for the logs
            System.err.println("ZkLocks: granted on " + node + ", a node of session 0x" + Long.toHexString(st.getEphemeralOwner())
                    + ", not of the current session 0x" + Long.toHexString(session));
        }
        Stat parent = new Stat();
        List<String> children = c.getChildren().storingStatIn(parent).forPath(node.substring(0, node.lastIndexOf('/')));
        return confirm(node, st, children, parent, session);
    }

    /**
     * Curator pull request 500's check, on the grant as told: its node is the current session's (its
     * ephemeralOwner), not one of an earlier session that Curator gave up, which the servers still hold
     * and will delete. Made on the reads the grant is told from, not on reads before them: the session
     * can change in between, and a grant checked on the old one was told on the new (curator-mutex
     * --fix=604, seed 480: checked, then Curator's new session came before the grant was told). Says so
     * on stderr when it fails.
     */
    static boolean ownNode(Grant g) {
        if (g.own()) {
            return true;
        }
        System.err.println("ZkLocks --fix: " + g.node() + " is not of the current session 0x" + Long.toHexString(g.session())
                + (g.owner() == 0 ? " (gone)" : " but of 0x" + Long.toHexString(g.owner())) + ": let go");
        return false;
    }

    // ---- InterProcessMutex

    static class Mutex implements Lock {
        final CuratorFramework c;
        final boolean fix604;
        final Map<String, Node> locks = new HashMap<>();
        final Map<String, Boolean> held = new java.util.concurrent.ConcurrentHashMap<>();

        /** InterProcessMutex, its node told (getLockPath is protected). */
        static class Node extends InterProcessMutex {
            Node(CuratorFramework c, String path) {
                super(c, path);
            }

            String node() {
                return getLockPath();
            }
        }

        Mutex(CuratorFramework c, boolean fix604) {
            this.c = c;
            this.fix604 = fix604;
            c.getConnectionStateListenable().addListener((client, state) -> {
                if (state == ConnectionState.LOST) {
                    for (String name : held.keySet()) {
                        if (held.remove(name) != null) {
                            lost(name);
                        }
                    }
                }
            });
        }

        public Grant acquire(String name, long timeoutMs) throws Exception {
            Node m = locks.computeIfAbsent(name, n -> new Node(c, prefix + n));
            long deadline = System.currentTimeMillis() + timeoutMs;
            for (;;) {
                if (!m.acquire(Math.max(0, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS)) {
                    throw new Fail("timeout: not acquired in " + timeoutMs + " ms", true); // Curator deleted its node
                }
                held.put(name, true); // a LOST from here on is told
                Grant g;
                try {
                    g = confirm(c, m.node());
                } catch (Exception e) {
                    held.remove(name);
                    m.release();
                    throw new Fail(e.getMessage() + " (released)", false);
                }
                if (!fix604 || ownNode(g)) {
                    return g;
                }
                held.remove(name);
                m.release();
            }
        }

        public void release(String name) throws Exception {
            Node m = locks.get(name);
            if (m == null || !m.isOwnedByCurrentThread()) {
                throw new Fail("not held: " + name, true);
            }
            held.remove(name);
            m.release(); // a node already gone is no error to Curator
        }

        public void close() {
            c.close();
        }

        public void warm(String path) throws Exception {
            Node m = new Node(c, path);
            try {
                if (!m.acquire(ttlMs, TimeUnit.MILLISECONDS)) {
                    throw new Fail("not acquired in " + ttlMs + " ms", true);
                }
                try {
                    confirm(c, m.node());
                } finally {
                    m.release();
                }
            } finally {
                c.delete().deletingChildrenIfNeeded().forPath(path);
            }
        }
    }

    // ---- LeaderLatch

    static class Latch implements Lock {
        final CuratorFramework c;
        final boolean fix500;
        final Map<String, LeaderLatch> latches = new java.util.concurrent.ConcurrentHashMap<>();

        Latch(CuratorFramework c, boolean fix500) {
            this.c = c;
            this.fix500 = fix500;
        }

        /**
         * What Curator pull request 500 (CURATOR-696) does when the leadership stands on a node of an
         * earlier session (Curator declared it lost and made a new one; the servers expire the old one
         * later): the latch's own reset, package-private.
         */
        static void reset(LeaderLatch l) throws Exception {
            java.lang.reflect.Method reset = LeaderLatch.class.getDeclaredMethod("reset");
            reset.setAccessible(true);
            reset.invoke(l);
        }

        public Grant acquire(String name, long timeoutMs) throws Exception {
            LeaderLatch l = latches.get(name);
            if (l == null) {
                l = new LeaderLatch(c, prefix + name, System.getenv().getOrDefault("LOCKTEST_CLIENT", "c0"));
                l.start();
                latches.put(name, l);
            }
            long deadline = System.currentTimeMillis() + timeoutMs;
            Grant g;
            for (;;) {
                if (!l.await(Math.max(0, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS)) {
                    withdraw(name);
                    throw new Fail("timeout: no leadership in " + timeoutMs + " ms", true);
                }
                String node = l.getOurPath();
                if (fix500 && node == null) { // resetting already: not leader
                    continue;
                }
                try {
                    g = confirm(c, node);
                } catch (Exception e) {
                    withdraw(name);
                    throw new Fail(e.getMessage() + " (latch closed)", false);
                }
                if (!fix500 || ownNode(g)) {
                    break;
                }
                reset(l);
            }
            final LeaderLatch mine = l;
            l.addListener(new LeaderLatchListener() {
                public void isLeader() {}

                public void notLeader() {
                    if (latches.get(name) == mine) {
                        lost(name);
                    }
                }
            });
            if (!l.hasLeadership()) { // lost while we read its node
                throw new Fail("leadership lost as it was granted", false);
            }
            return g;
        }

        /** Closes the latch of name and waits for its node to go: a refusal must hold nothing. */
        void withdraw(String name) throws Exception {
            LeaderLatch l = latches.remove(name);
            if (l == null) {
                return;
            }
            String node = l.getOurPath();
            l.close(); // its node is deleted in the background (guaranteed)
            for (int i = 0; node != null && i < 25 && c.checkExists().forPath(node) != null; i++) {
                Thread.sleep(20);
            }
            if (node != null && c.checkExists().forPath(node) != null) {
                throw new Fail("latch closed, but its node " + node + " is still there", false);
            }
        }

        public void release(String name) throws Exception {
            LeaderLatch l = latches.get(name);
            if (l == null) {
                throw new Fail("not held: " + name, true);
            }
            latches.remove(name);
            l.close();
        }

        public void close() {
            c.close();
        }

        public void warm(String path) throws Exception {
            LeaderLatch l = new LeaderLatch(c, path, "warm-up");
            l.start();
            try {
                if (!l.await(ttlMs, TimeUnit.MILLISECONDS)) {
                    throw new Fail("no leadership in " + ttlMs + " ms", true);
                }
                confirm(c, l.getOurPath());
            } finally {
                l.close();
                c.delete().deletingChildrenIfNeeded().forPath(path);
            }
        }
    }

    // ---- ZooKeeper's WriteLock

    static class Write implements Lock {
        ZooKeeper zk;
        final boolean fix26;
        final Map<String, WriteLock> locks = new HashMap<>();
        final Map<String, Boolean> held = new java.util.concurrent.ConcurrentHashMap<>();

        Write(boolean fix26) throws Exception {
            this.fix26 = fix26;
            connect();
        }

        /** The fix of --fix=26: lock() again while the node it was to watch is gone. */
        boolean lockWatchingLive(ZooKeeper z, WriteLock l) throws Exception {
            java.lang.reflect.Field last = WriteLock.class.getDeclaredField("lastChildId");
            last.setAccessible(true);
            for (;;) {
                if (l.lock()) {
                    return true;
                }
                String watched = (String) last.get(l);
                if (watched == null || z.exists(watched, false) != null) {
                    return false;
                }
                System.err.println("ZkLocks --fix=26: " + watched + ", the node lock() watched, is gone: looking again");
            }
        }

        /** A new session (after its last expired, as an application must make one), connecting in the background. */
        void connect() throws Exception {
            ZooKeeper[] self = new ZooKeeper[1];
            Watcher w = ev -> {
                switch (ev.getState()) {
                    case Expired -> {
                        synchronized (this) {
                            if (zk == self[0]) {
                                zk = null;
                            }
                        }
                        for (String name : held.keySet()) {
                            if (held.remove(name) != null) {
                                lost(name);
                            }
                        }
                    }
                    default -> {}
                }
            };
            self[0] = new ZooKeeper(endpoints, ttlMs, w);
            synchronized (this) {
                zk = self[0];
            }
            locks.clear();
        }

        synchronized ZooKeeper zk() {
            return zk;
        }

        /** The lock's parent znodes: WriteLock creates its own directory, not its parents. */
        void parents(ZooKeeper z, String dir) throws Exception {
            for (int i = dir.indexOf('/', 1); i > 0; i = dir.indexOf('/', i + 1)) {
                try {
                    z.create(dir.substring(0, i), new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                } catch (KeeperException.NodeExistsException e) {
                    // there already
                }
            }
        }

        public Grant acquire(String name, long timeoutMs) throws Exception {
            if (zk() == null) {
                connect();
            }
            ZooKeeper z = zk();
            WriteLock l = locks.get(name);
            if (l == null) {
                try {
                    parents(z, prefix + name);
                } catch (KeeperException e) {
                    throw new Fail("creating the lock's parents: " + e, true);
                }
                l = new WriteLock(z, prefix + name, ZooDefs.Ids.OPEN_ACL_UNSAFE);
                locks.put(name, l);
            }
            CountDownLatch got = new CountDownLatch(1);
            l.setLockListener(new LockListener() {
                public void lockAcquired() {
                    got.countDown();
                }

                public void lockReleased() {}
            });
            boolean owner;
            try {
                owner = (fix26 ? lockWatchingLive(z, l) : l.lock()) || got.await(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (KeeperException e) { // its retries ran out: its node may be there
                throw new Fail("lock(): " + e, false);
            }
            if (!owner) {
                l.unlock(); // deletes its node (throws if it cannot)
                throw new Fail("timeout: not acquired in " + timeoutMs + " ms", true);
            }
            held.put(name, true);
            String node = l.getId();
            try {
                Stat parent = new Stat();
                Stat st = z.exists(node, false);
                return confirm(node, st, z.getChildren(prefix + name, false, parent), parent, z.getSessionId());
            } catch (Exception e) {
                held.remove(name);
                l.unlock();
                throw new Fail(e.getMessage() + " (unlocked)", false);
            }
        }

        public void release(String name) throws Exception {
            WriteLock l = locks.get(name);
            if (l == null || held.remove(name) == null) {
                throw new Fail("not held: " + name, true);
            }
            l.unlock(); // a node already gone is no error to WriteLock
        }

        public void close() throws InterruptedException {
            ZooKeeper z = zk();
            if (z != null) {
                z.close();
            }
        }

        public void warm(String path) throws Exception {
            ZooKeeper z = zk();
            parents(z, path);
            WriteLock l = new WriteLock(z, path, ZooDefs.Ids.OPEN_ACL_UNSAFE);
            CountDownLatch got = new CountDownLatch(1);
            l.setLockListener(new LockListener() {
                public void lockAcquired() {
                    got.countDown();
                }

                public void lockReleased() {}
            });
            try {
                if (!l.lock() && !got.await(ttlMs, TimeUnit.MILLISECONDS)) {
                    throw new Fail("not acquired in " + ttlMs + " ms", true);
                }
                Stat parent = new Stat();
                confirm(l.getId(), z.exists(l.getId(), false), z.getChildren(path, false, parent), parent, z.getSessionId());
            } finally {
                l.unlock();
                z.delete(path, -1);
            }
        }
    }

    // ---- the protocol

    static void serve(Lock lk) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String raw; (raw = in.readLine()) != null; ) {
            if (raw.isBlank()) {
                continue;
            }
            Map<String, String> req = parse(raw);
            String id = req.getOrDefault("id", "0"), op = req.getOrDefault("op", ""), name = req.getOrDefault("lock", "");
            try {
                switch (op) {
                    case "acquire" -> {
                        Grant g = lk.acquire(name, Long.parseLong(req.getOrDefault("timeout_ms", "5000")));
                        emit("{\"id\":" + id + ",\"ok\":true,\"key\":" + quote(g.node())
                                + (g.czxid() > 0 ? ",\"token\":" + g.czxid() : "")
                                + (g.decided() > 0 ? ",\"revision\":" + g.decided() : "")
                                + (g.session() != 0 ? ",\"session\":\"0x" + Long.toHexString(g.session()) + "\"" : "") + "}");
                    }
                    case "release" -> {
                        lk.release(name);
                        emit("{\"id\":" + id + ",\"ok\":true}");
                    }
                    default -> emit("{\"id\":" + id + ",\"ok\":false,\"error\":" + quote("unknown op " + op) + ",\"definite\":true}");
                }
            } catch (Fail f) {
                emit("{\"id\":" + id + ",\"ok\":false,\"error\":" + quote(f.getMessage()) + ",\"definite\":" + f.definite + "}");
            } catch (Exception e) { // anything else: it may have taken effect
                emit("{\"id\":" + id + ",\"ok\":false,\"error\":" + quote(e.toString()) + ",\"definite\":false}");
            }
        }
    }

    /** A flat JSON object's members (strings and numbers), as locktest's requests are. */
    static Map<String, String> parse(String s) {
        Map<String, String> m = new HashMap<>();
        int i = s.indexOf('{') + 1;
        while (i > 0 && i < s.length()) {
            int k0 = s.indexOf('"', i);
            if (k0 < 0) {
                break;
            }
            StringBuilder key = new StringBuilder();
            i = string(s, k0 + 1, key);
            i = s.indexOf(':', i) + 1;
            while (Character.isWhitespace(s.charAt(i))) {
                i++;
            }
            StringBuilder val = new StringBuilder();
            if (s.charAt(i) == '"') {
                i = string(s, i + 1, val);
            } else {
                while (i < s.length() && ",}".indexOf(s.charAt(i)) < 0) {
                    val.append(s.charAt(i++));
                }
            }
            m.put(key.toString(), val.toString().trim());
            i = s.indexOf(',', i) + 1;
        }
        return m;
    }

    /** Reads a JSON string's body from i (after its quote) into b; returns the index after its end. */
    static int string(String s, int i, StringBuilder b) {
        for (; s.charAt(i) != '"'; i++) {
            char ch = s.charAt(i);
            if (ch == '\\') {
                ch = s.charAt(++i);
                switch (ch) {
                    case 'n' -> b.append('\n');
                    case 't' -> b.append('\t');
                    case 'r' -> b.append('\r');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'u' -> {
                        b.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
                        i += 4;
                    }
                    default -> b.append(ch);
                }
            } else {
                b.append(ch);
            }
        }
        return i + 1;
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (ch < 0x20) {
                        b.append(String.format("\\u%04x", (int) ch));
                    } else {
                        b.append(ch);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
