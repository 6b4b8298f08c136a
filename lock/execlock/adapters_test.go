package execlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The adapters of real lock libraries (adapters/) pass the conformance
// cases on a real system, each where its runtime and library are
// installed (.ci/run installs them: adapters/apt-packages, and npm ci in
// adapters/), and skips saying what is missing where they are not.
func TestAdapters(t *testing.T) {
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
		{"redlock", "redis", func(t *testing.T) []string { return node(t, "@sesamecare-oss/redlock", "redlock.js") }},
		{"etcd3-node", "etcd", func(t *testing.T) []string { return node(t, "etcd3", "etcd3_node.js") }},
		{"etcdmutex", "etcd", func(t *testing.T) []string {
			bin := filepath.Join(t.TempDir(), "etcdmutex")
			if out, err := exec.Command("go", "build", "-o", bin, "./adapters/etcdmutex").CombinedOutput(); err != nil {
				t.Fatalf("go build ./adapters/etcdmutex: %v\n%s", err, out)
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
		t.Run(a.name, func(t *testing.T) { conform(t, a.backend, a.command(t)) })
	}
}
