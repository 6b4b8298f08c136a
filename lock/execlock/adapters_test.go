package execlock_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/execlock"
)

// javaClasspath is the Java adapter's classpath: Debian's jars, whose
// manifests name what they need in turn.
var javaClasspath = []string{"/usr/share/java/curator-recipes.jar", "/usr/share/java/zookeeper-recipes-lock.jar", "/usr/share/java/slf4j-simple.jar"}

// The adapters of real lock libraries (adapters/) pass the conformance
// cases on a real system, each where its runtime and library are
// installed (.ci/run installs them: adapters/apt-packages, and npm ci in
// adapters/), and skips saying what is missing where they are not.
func TestAdapters(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("adapters")
	if err != nil {
		t.Fatal(err)
	}
	python := func(t *testing.T, module, pkg, script string) []string {
		if err := exec.Command("/usr/bin/python3", "-c", "import "+module).Run(); err != nil {
			t.Skipf("/usr/bin/python3 cannot import %s (apt-get install %s; .ci/run installs adapters/apt-packages): %v", module, pkg, err)
		}
		return []string{"/usr/bin/python3", filepath.Join(dir, script)}
	}
	node := func(t *testing.T, module, script string) []string {
		bin, err := exec.LookPath("node")
		if err != nil {
			t.Skip("node not on PATH: the adapter is a Node script")
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", module)); err != nil {
			t.Skipf("%s is not installed in adapters/node_modules (npm ci --prefix lock/execlock/adapters; .ci/run does): %v", module, err)
		}
		return []string{bin, filepath.Join(dir, script)}
	}
	for _, a := range []struct {
		name, backend string
		command       func(t *testing.T) []string
	}{
		{"redis-py", "redis", func(t *testing.T) []string { return python(t, "redis", "python3-redis", "redis_py.py") }},
		{"python-etcd3", "etcd", func(t *testing.T) []string { return python(t, "etcd3", "python3-etcd3", "etcd3_py.py") }},
		{"kazoo", "zookeeper", func(t *testing.T) []string { return python(t, "kazoo", "python3-kazoo", "kazoo_py.py") }},
		{"curator-mutex", "zookeeper", func(t *testing.T) []string { return javaCommand(t, dir, "curator-mutex") }},
		{"curator-leader-latch", "zookeeper", func(t *testing.T) []string { return javaCommand(t, dir, "leader-latch") }},
		// The upstream fixes the Curator scenarios' contrasts apply.
		{"curator-mutex-fix-604", "zookeeper", func(t *testing.T) []string { return javaCommand(t, dir, "curator-mutex", "--fix=604") }},
		{"curator-leader-latch-fix-500", "zookeeper", func(t *testing.T) []string { return javaCommand(t, dir, "leader-latch", "--fix=500") }},
		{"zk-writelock", "zookeeper", func(t *testing.T) []string { return javaCommand(t, dir, "writelock") }},
		// The fixes the contrasts of zk-writelock-watch and redis-py-4279
		// apply keep the protocol.
		{"zk-writelock-fix-26", "zookeeper", func(t *testing.T) []string { return javaCommand(t, dir, "writelock", "--fix=26") }},
		{"redis-py-persistent-renew-fix-4282", "redis", func(t *testing.T) []string {
			return append(python(t, "redis", "python3-redis", "redis_py.py"), "--persistent", "--renew", "--fix=4282")
		}},
		{"redlock", "redis", func(t *testing.T) []string { return node(t, "@sesamecare-oss/redlock", "redlock.js") }},
		{"etcd3-node", "etcd", func(t *testing.T) []string { return node(t, "etcd3", "etcd3_node.js") }},
		// The pinned releases of the catalog's Node bugs (etcd3-node-176,
		// node-redlock-296) keep the protocol when no fault strikes.
		{"etcd3-node-election", "etcd", func(t *testing.T) []string { return append(node(t, "etcd3", "etcd3_node.js"), "--election") }},
		{"etcd3-node-election-1.1.0", "etcd", func(t *testing.T) []string {
			return append(node(t, "etcd3-1.1.0", "etcd3_node.js"), "--election", "--etcd3=1.1.0")
		}},
		{"redlock-5.0.0-beta.2", "redis", func(t *testing.T) []string {
			return append(node(t, "redlock-5.0.0-beta.2", "redlock.js"), "--using", "--redlock=5.0.0-beta.2")
		}},
		{"etcdmutex", "etcd", func(t *testing.T) []string {
			bin := filepath.Join(t.TempDir(), "etcdmutex")
			if out, err := exec.Command("go", "build", "-o", bin, "./adapters/etcdmutex").CombinedOutput(); err != nil {
				t.Fatalf("go build ./adapters/etcdmutex: %v\n%s", err, out)
			}
			return []string{bin}
		}},
		{"gozklock", "zookeeper", func(t *testing.T) []string {
			bin := filepath.Join(t.TempDir(), "gozklock")
			if out, err := exec.Command("go", "build", "-o", bin, "./adapters/gozklock").CombinedOutput(); err != nil {
				t.Fatalf("go build ./adapters/gozklock: %v\n%s", err, out)
			}
			return []string{bin}
		}},
		{"etcdmutex-3.4", "etcd", func(t *testing.T) []string {
			// Its own module, pinning etcd 3.4.13's client: the first
			// build downloads and compiles it.
			bin := filepath.Join(t.TempDir(), "etcdmutex34")
			if out, err := exec.Command("go", "build", "-C", "adapters/etcdmutex34", "-o", bin, ".").CombinedOutput(); err != nil {
				t.Fatalf("go build -C adapters/etcdmutex34: %v\n%s", err, out)
			}
			return []string{bin}
		}},
	} {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			conform(t, a.backend, a.command(t))
		})
	}
}

// javaCommand is the command of the Java adapter (ZkLocks.java in dir) for
// one of its locks, with flags; it skips, saying what to install, where
// javac or a jar is missing.
func javaCommand(t testing.TB, dir, mode string, flags ...string) []string {
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("javac not on PATH: the adapter is a Java source, compiled by locktest (apt-get install openjdk-17-jdk-headless)")
	}
	for _, j := range javaClasspath {
		if _, err := os.Stat(j); err != nil {
			t.Skipf("%s is missing (apt-get install libcurator-recipes-java zookeeper libslf4j-java; .ci/run installs adapters/apt-packages): %v", j, err)
		}
	}
	cmd := append([]string{"java"}, javaTestFlags...)
	return append(append(cmd, "-cp", strings.Join(javaClasspath, ":"), filepath.Join(dir, "ZkLocks.java"), mode), flags...)
}

// javaTestFlags make the test's Java clients cheap to start: with C2 and
// the parallel collector, each of the package's ~40 JVMs spent seconds of
// CPU compiling and collecting what a client doing a few dozen operations
// never needs. They change how the JVM runs, not what the adapter does.
var javaTestFlags = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:CICompilerCount=1", "-XX:-UsePerfData", "-Xss512k"}

// BenchmarkJavaStart measures what a Java client's start costs, on one
// ZooKeeper server without faults: up-ms, from its spawn until locktest
// takes it to be up (idle, waiting for its first request: Recipe.Start
// and, for a replacement, Recipe.New), and first-acquire-ms, its first
// acquire of a free lock after that (what the JVM's warm-up left cold),
// against acquire-ms, the next.
func BenchmarkJavaStart(b *testing.B) {
	dir, err := filepath.Abs("adapters")
	if err != nil {
		b.Fatal(err)
	}
	vars := system(b, "zookeeper")
	env := lock.Env{Backend: "zookeeper", Prefix: "/locktest/bench/", TTL: 2, Name: "c0", OpTimeout: 5 * time.Second}
	for _, v := range vars {
		if e, ok := strings.CutPrefix(v, "LOCKTEST_ENDPOINTS="); ok {
			env.Endpoints = strings.Split(e, ",")
		}
	}
	for _, mode := range []string{"curator-mutex", "leader-latch", "writelock"} {
		b.Run(mode, func(b *testing.B) {
			r := execlock.New(javaCommand(b, dir, mode)...)
			var up, first, next time.Duration
			for i := 0; i < b.N; i++ {
				began := time.Now()
				l, err := r.New(context.Background(), env)
				if err != nil {
					b.Fatal(err)
				}
				up += time.Since(began)
				for j, d := range []*time.Duration{&first, &next} {
					began = time.Now()
					h, err := l.Acquire(context.Background(), "lock")
					if err != nil {
						b.Fatalf("acquire %d: %v", j, err)
					}
					*d += time.Since(began)
					if err := h.Release(context.Background()); err != nil {
						b.Fatalf("release %d: %v", j, err)
					}
				}
				l.Close()
			}
			ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N) }
			b.ReportMetric(ms(up), "up-ms")
			b.ReportMetric(ms(first), "first-acquire-ms")
			b.ReportMetric(ms(next), "acquire-ms")
		})
	}
}
