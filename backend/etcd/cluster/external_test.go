package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/links"
	"github.com/locktest/locktest/internal/partest"
	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/system"
)

// The tests below treat a process cluster as someone else's running
// cluster: External reaches it only through its members' client URLs.

func endpointsOf(c *Cluster) []string {
	var eps []string
	for _, m := range c.Members() {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// settle waits until the cluster's own clients are connected, and returns
// the goroutines then, for waitOwnGoroutines.
func settle(t *testing.T, ctx context.Context, c *Cluster) map[string]string {
	t.Helper()
	for _, m := range c.Members() {
		if _, err := m.server().(*process).client.MemberList(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return goroutines()
}

// waitOwnGoroutines waits until the goroutines started since before have
// exited, but the cluster's peer relays, whose connections come and go
// with the members' raft traffic.
func waitOwnGoroutines(t *testing.T, before map[string]string) {
	t.Helper()
	waitGoroutines(t, before, "cluster.(*relay)")
}

func connect(t *testing.T, ctx context.Context, cfg ExternalConfig) *External {
	t.Helper()
	e, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// blackhole puts a timeout toxic on every link of ps: nothing gets through
// and nothing is closed.
func blackhole(t *testing.T, ps []*toxiclient.Proxy) {
	t.Helper()
	for _, p := range ps {
		if _, err := p.AddToxic("blackhole", "timeout", "downstream", 1, toxiclient.Attributes{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
}

// failsWithin checks that a read through cl fails within d.
func failsWithin(t *testing.T, ctx context.Context, cl *clientv3.Client, d time.Duration) {
	t.Helper()
	short, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if _, err := cl.Get(short, "/locktest/any"); err == nil {
		t.Fatal("a read through blackholed links succeeded")
	}
}

// reads polls until cl reads want at key.
func reads(t *testing.T, ctx context.Context, cl *clientv3.Client, key, want string) {
	t.Helper()
	polltest.Until(t, 10*time.Second, "a read of "+key+" = "+want, func() bool {
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		r, err := cl.Get(short, key)
		return err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) == want
	})
}

// TestExternal: member names, version and leader read from the cluster,
// the capabilities it offers and the member faults refused with a hint,
// client links behind toxiproxy that a fault singles one client out on,
// the resource link, leases, hashes; Close leaves nothing behind.
func TestExternal(t *testing.T) {
	partest.Own(t, "TestOwnProcess")
	c, ctx := startProcesses(t, Config{})
	before := settle(t, ctx, c)
	logDir := t.TempDir()
	eps := endpointsOf(c)
	e := connect(t, ctx, ExternalConfig{Endpoints: eps, Prefix: "/locktest/r1/", LogDir: logDir})

	want := fmt.Sprintf("etcd %s, external cluster of 3 members (m0 %s, m1 %s, m2 %s)", c.Etcd().Version, eps[0], eps[1], eps[2])
	if e.Describe() != want {
		t.Errorf("Describe = %q, want %q", e.Describe(), want)
	}
	if !slices.Equal(e.MemberNames(), c.MemberNames()) {
		t.Errorf("MemberNames = %v, want %v", e.MemberNames(), c.MemberNames())
	}
	li, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cl, err := c.Leader(ctx); err != nil || cl != li {
		t.Fatalf("Leader = %d, the cluster says %d (%v)", li, cl, err)
	}

	for _, cp := range []system.Capability{system.CapLeader, system.CapLinks, system.CapLeases, system.CapHash} {
		if !system.Has(e, cp) {
			t.Errorf("lacks %s", cp)
		}
	}
	// Member faults are refused by name; of pause and crash, only their
	// client kinds are drawn.
	err = nemesis.Refuse(e, []string{"partition"})
	if err == nil || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "external cluster") || !strings.Contains(err.Error(), "need --cluster process or --cluster embedded") {
		t.Errorf("Refuse(partition) = %v, want one line with the hint", err)
	}
	t.Logf("a member fault: %v", err)
	if err := nemesis.Refuse(e, []string{"isolate", "lease", "slow", "clock", "pause", "crash"}); err != nil {
		t.Errorf("Refuse of client faults: %v", err)
	}
	offers := nemesis.Offered(e)
	for kind, want := range map[string]bool{nemesis.PauseClient: true, nemesis.CrashClient: true, nemesis.PauseMember: false,
		nemesis.CrashMember: false, nemesis.CrashLeader: false, nemesis.PartitionLeader: false} {
		if slices.Contains(offers, kind) != want {
			t.Errorf("Offered(%s) = %v, want %v", kind, !want, want)
		}
	}
	sched := nemesis.Schedule{Members: 3, Entries: []nemesis.Entry{{Fault: nemesis.PauseMember, Target: "m0", Duration: time.Second}}}
	if err := nemesis.RefuseSchedule(e, sched); err == nil || !strings.Contains(err.Error(), "pause-member") {
		t.Errorf("RefuseSchedule(pause-member) = %v", err)
	}

	a, err := e.Client("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Client("b")
	if err != nil {
		t.Fatal(err)
	}
	epsA, err := e.Endpoints("a")
	if err != nil {
		t.Fatal(err)
	}
	linksA, err := e.Links("a")
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range linksA {
		m := c.Members()[i]
		if p.Upstream != m.ClientAddr() || p.Listen != epsA[i] || epsA[i] == m.ClientAddr() || !strings.HasSuffix(p.Name, "a->"+m.Name) {
			t.Errorf("link %d: %s %s -> %s, endpoint %s; want a proxy in front of %s", i, p.Name, p.Listen, p.Upstream, epsA[i], m.ClientAddr())
		}
	}
	if err := putVia(ctx, a, "/locktest/r1/k", "v1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	reads(t, ctx, b, "/locktest/r1/k", "v1")

	// A client fault: a hears nothing, b is untouched.
	isolateAndHeal(t, ctx, e, linksA, a, b, "/locktest/r1/k")

	echo := startEcho(t)
	defer echo.Close()
	ra, err := e.ResourceProxy("a", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	checkEcho(t, ra)
	if p, err := e.ResourceLink("a"); err != nil || p.Upstream != echo.Addr().String() || p.Listen != ra {
		t.Fatalf("ResourceLink = %+v, %v", p, err)
	}

	lease, err := a.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	hex := fmt.Sprintf("%x", int64(lease.ID))
	if gone, err := e.LeaseGone(ctx, hex); err != nil || gone {
		t.Fatalf("LeaseGone of a live lease = %v, %v", gone, err)
	}
	if err := e.RevokeLease(ctx, hex); err != nil {
		t.Fatal(err)
	}
	if gone, err := e.LeaseGone(ctx, hex); err != nil || !gone {
		t.Fatalf("LeaseGone of a revoked lease = %v, %v", gone, err)
	}

	hs, err := e.Hashes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	own, err := c.Hashes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hs {
		if h.Member != own[i].Member || h.Revision != own[i].Revision || h.Hash != own[i].Hash {
			t.Errorf("hash %d: %+v, the cluster's own %+v", i, h, own[i])
		}
	}

	addrs := append([]string{ra, e.links.Addr()}, epsA...)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	echo.Close()
	checkRefused(t, addrs)
	waitOwnGoroutines(t, before)
	if _, err := e.Client("c"); !errors.Is(err, serverkit.ErrClosed) {
		t.Errorf("Client after Close: %v", err)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, serverkit.ErrClosed) {
		t.Errorf("Leader after Close: %v", err)
	}
	log, err := os.ReadFile(filepath.Join(logDir, "external.log"))
	// The key written, and the run's two marks (external_owner.go).
	if err != nil || !strings.Contains(string(log), "deleted 3 keys under /locktest/r1/") {
		t.Errorf("external.log: %v\n%s", err, log)
	}
}

// TestExternalIsolation: Connect writes nothing but the run's marks under
// the prefix; keys outside the prefix, some sharing its first characters,
// are untouched by a run that writes, locks and cleans up under the prefix;
// nothing under it is left.
func TestExternalIsolation(t *testing.T) {
	t.Parallel()
	c, ctx := startProcesses(t, Config{})
	d, err := c.DirectClient()
	if err != nil {
		t.Fatal(err)
	}
	outside := []string{"/outside", "/locktest/r1", "/locktest/r10/x", "/locktest/r1-x", "/locktest/r0/y", "/locktest/r1.", "locktest/r1/z"}
	for _, k := range outside {
		if _, err := d.Put(ctx, k, "theirs "+k); err != nil {
			t.Fatal(err)
		}
	}
	snapshot := func() (map[string]string, int64) {
		r, err := d.Get(ctx, "", clientv3.WithFromKey())
		if err != nil {
			t.Fatal(err)
		}
		kvs := map[string]string{}
		for _, kv := range r.Kvs {
			kvs[string(kv.Key)] = fmt.Sprintf("%q@%d", kv.Value, kv.ModRevision)
		}
		return kvs, r.Header.Revision
	}
	was, rev := snapshot()

	logDir := t.TempDir()
	e := connect(t, ctx, ExternalConfig{Endpoints: endpointsOf(c), Prefix: "/locktest/r1/", LogDir: logDir})
	if kvs, now := snapshot(); now != rev+1 || len(kvs) != len(was)+2 ||
		kvs["/locktest/r1/"+runMark] == "" || kvs["/locktest/r1/"+aliveMark] == "" {
		t.Fatalf("Connect wrote: revision %d, was %d; keys %v", now, rev, kvs)
	}

	a, err := e.Client("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"/locktest/r1/", "/locktest/r1/k", "/locktest/r1/sub/k"} {
		if err := putVia(ctx, a, k, "ours", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// A lock held when the run ends: its key is bound to a lease.
	s, err := concurrency.NewSession(a, concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	if err := concurrency.NewMutex(s, "/locktest/r1/locks/l").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Hashes(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	now, _ := snapshot()
	for k, v := range was {
		if now[k] != v {
			t.Errorf("%s: %s before, %s after", k, v, now[k])
		}
	}
	for k := range now {
		if _, ok := was[k]; !ok {
			t.Errorf("%s (%s) is left", k, now[k])
		}
	}
	log, err := os.ReadFile(filepath.Join(logDir, "external.log"))
	if err != nil || !strings.Contains(string(log), "deleted 6 keys under /locktest/r1/") {
		t.Errorf("external.log: %v\n%s", err, log)
	}
}

// tlsFiles are a CA and a certificate it signed, as PEM files.
type tlsFiles struct{ ca, cert, key string }

// writeTLS makes a CA and a certificate for hosts (IP addresses or DNS
// names), good for server and client authentication, in dir.
func writeTLS(t *testing.T, dir string, hosts ...string) tlsFiles {
	t.Helper()
	caKey, caCert, caDER := newCert(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "locktest test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign,
	})
	leaf := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	key, _, der := newCert(t, caCert, caKey, leaf)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := tlsFiles{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem")}
	for file, blk := range map[string]*pem.Block{
		f.ca:   {Type: "CERTIFICATE", Bytes: caDER},
		f.cert: {Type: "CERTIFICATE", Bytes: der},
		f.key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// newCert makes a key and a certificate from tmpl, signed by parent (nil:
// self-signed).
func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

// TestExternalTLS: a cluster that serves TLS and wants client
// certificates; clients reach it through the proxies, verifying the
// members' certificates; a wrong CA or no client certificate fails
// Connect.
func TestExternalTLS(t *testing.T) {
	partest.Own(t, "TestOwnProcess")
	f := writeTLS(t, t.TempDir(), "127.0.0.1", "localhost")
	files := &TLSFiles{CertFile: f.cert, KeyFile: f.key, TrustedCAFile: f.ca}
	if _, err := Start(context.Background(), Config{TLS: files}); err == nil || !strings.Contains(err.Error(), "process members only") {
		t.Errorf("an embedded cluster with TLS: %v", err)
	}
	c, ctx := startProcesses(t, Config{TLS: files})
	eps := endpointsOf(c)
	if !strings.HasPrefix(eps[0], "https://") {
		t.Fatalf("client URL %s, want https", eps[0])
	}
	own, err := c.DirectClient()
	if err != nil {
		t.Fatal(err)
	}
	before := settle(t, ctx, c)
	e := connect(t, ctx, ExternalConfig{Endpoints: eps, CACert: f.ca, Cert: f.cert, Key: f.key, Prefix: "/locktest/tls/"})
	a, err := e.Client("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := putVia(ctx, a, "/locktest/tls/k", "v", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	d, err := e.DirectClient(1)
	if err != nil {
		t.Fatal(err)
	}
	reads(t, ctx, d, "/locktest/tls/k", "v")
	if _, err := e.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := own.Get(ctx, "/locktest/tls/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
		t.Errorf("keys left under the prefix: %v, %v", r, err)
	}

	other := writeTLS(t, t.TempDir(), "127.0.0.1")
	for name, tc := range map[string]struct {
		cfg  ExternalConfig
		want string
	}{
		"a wrong CA":            {ExternalConfig{CACert: other.ca, Cert: f.cert, Key: f.key}, "certificate signed by unknown authority"},
		"no client certificate": {ExternalConfig{CACert: f.ca}, "no client certificate was given: --cert, --key"},
	} {
		tc.cfg.Endpoints, tc.cfg.Prefix = eps, "/locktest/tls/"
		began := time.Now()
		_, err := Connect(ctx, tc.cfg)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "--endpoints https://127.0.0.1:") ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("Connect with %s = %v, want one line naming the endpoint and %q", name, err, tc.want)
		}
		t.Logf("with %s, Connect failed after %v: %v", name, time.Since(began).Round(time.Millisecond), err)
	}
	waitOwnGoroutines(t, before)
}

// TestVerifyAnyHost: the proxied clients' verification checks the chain
// against the CA and accepts a certificate valid for any of the
// endpoints' hosts, which the dialled proxy address is not.
func TestVerifyAnyHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := writeTLS(t, dir, "etcd-0.example")
	other := writeTLS(t, t.TempDir(), "etcd-0.example")
	leaf := func(f tlsFiles) *x509.Certificate {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	ca, err := os.ReadFile(f.ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	ours, theirs := leaf(f), leaf(other)
	if ours.VerifyHostname("127.0.0.1") == nil {
		t.Fatal("the certificate names the proxies' address; the test proves nothing")
	}
	state := func(c *x509.Certificate) tls.ConnectionState {
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
	}
	if err := verifyAnyHost(roots, []string{"etcd-1.example", "etcd-0.example"})(state(ours)); err != nil {
		t.Errorf("a certificate valid for an endpoint's host: %v", err)
	}
	for name, tc := range map[string]struct {
		hosts []string
		cert  *x509.Certificate
		want  string
	}{
		"another host": {[]string{"etcd-1.example", "127.0.0.1"}, ours, "valid for none of the endpoints' hosts (etcd-1.example, 127.0.0.1)"},
		"another CA":   {[]string{"etcd-0.example"}, theirs, "unknown authority"},
	} {
		if err := verifyAnyHost(roots, tc.hosts)(state(tc.cert)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if err := verifyAnyHost(roots, []string{"etcd-0.example"})(tls.ConnectionState{}); err == nil {
		t.Error("no certificate was accepted")
	}
}

// TestExternalBadInput: each mistake fails Connect with one line naming
// what is wrong, and leaves nothing running, connected, or deleted.
func TestExternalBadInput(t *testing.T) {
	partest.Own(t, "TestOwnProcess")
	c, ctx := startProcesses(t, Config{})
	eps := endpointsOf(c)
	d, err := c.DirectClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(ctx, "/locktest/used/k", "theirs"); err != nil {
		t.Fatal(err)
	}
	before := settle(t, ctx, c)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String()
	closed.Close()
	// Bound but never served: connections are accepted by the kernel and
	// never answered.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silentURL := "http://" + silent.Addr().String()
	notToxiproxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))
	defer notToxiproxy.Close()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := writeTLS(t, dir, "127.0.0.1")
	missing := filepath.Join(dir, "missing.pem")
	https := []string{"https://127.0.0.1:1"}

	for _, tc := range []struct {
		name string
		cfg  ExternalConfig
		want string
	}{
		{"no endpoints", ExternalConfig{}, "--endpoints: none given"},
		{"no scheme", ExternalConfig{Endpoints: []string{"127.0.0.1:2379"}}, "--endpoints 127.0.0.1:2379: want a client URL"},
		{"no port", ExternalConfig{Endpoints: []string{"http://127.0.0.1"}}, "--endpoints http://127.0.0.1: want a client URL"},
		{"a path", ExternalConfig{Endpoints: []string{"http://127.0.0.1:2379/v3"}}, "--endpoints http://127.0.0.1:2379/v3: want a client URL"},
		{"another scheme", ExternalConfig{Endpoints: []string{"unix://127.0.0.1:2379"}}, "want a client URL"},
		{"mixed schemes", ExternalConfig{Endpoints: []string{eps[0], "https://127.0.0.1:1"}}, "all http or all https"},
		{"a closed port", ExternalConfig{Endpoints: []string{eps[0], eps[1], closedURL}}, "--endpoints " + closedURL + ": Status: rpc error: code = Unavailable"},
		{"a silent port", ExternalConfig{Endpoints: []string{eps[0], silentURL, eps[2]}}, "--endpoints " + silentURL + ": no answer to Status within 3s"},
		{"a member missing", ExternalConfig{Endpoints: eps[:2]}, "--endpoints: the cluster has 3 members, and none of the endpoints is m2 [" + eps[2] + "]"},
		{"a member twice", ExternalConfig{Endpoints: []string{eps[0], eps[1], eps[1]}}, "--endpoints " + eps[1] + " and " + eps[1] + ": the same member"},
		{"a used prefix", ExternalConfig{Endpoints: eps, Prefix: "/locktest/used/"}, "prefix /locktest/used/ already holds 1 keys"},
		{"an empty prefix", ExternalConfig{Endpoints: eps, Prefix: ""}, `prefix "": want a path of its own ending in /`},
		{"the root", ExternalConfig{Endpoints: eps, Prefix: "/"}, `prefix "/": want`},
		{"no final slash", ExternalConfig{Endpoints: eps, Prefix: "/locktest/r1"}, `prefix "/locktest/r1": want`},
		{"TLS files for http", ExternalConfig{Endpoints: eps, CACert: f.ca}, "--cacert, --cert and --key are for https endpoints, and " + eps[0] + " is http"},
		{"a missing CA", ExternalConfig{Endpoints: https, CACert: missing}, "--cacert " + missing + ": no such file or directory"},
		{"a CA not PEM", ExternalConfig{Endpoints: https, CACert: notPEM}, "--cacert " + notPEM + ": not PEM"},
		{"a key not PEM", ExternalConfig{Endpoints: https, CACert: f.ca, Cert: f.cert, Key: notPEM}, "--key " + notPEM + ": not PEM"},
		{"a missing cert", ExternalConfig{Endpoints: https, Cert: missing, Key: f.key}, "--cert " + missing + ": no such file"},
		{"a cert without key", ExternalConfig{Endpoints: https, Cert: f.cert}, "--cert " + f.cert + ": needs its --key"},
		{"a cert for another key", ExternalConfig{Endpoints: https, Cert: f.cert, Key: writeTLS(t, t.TempDir(), "x").key}, "--cert " + f.cert + ", --key "},
		{"not a toxiproxy", ExternalConfig{Endpoints: eps, Toxiproxy: notToxiproxy.URL}, "--toxiproxy " + notToxiproxy.URL + ": not a toxiproxy"},
		{"no toxiproxy", ExternalConfig{Endpoints: eps, Toxiproxy: closedURL}, "--toxiproxy " + closedURL + ": not a toxiproxy"},
	} {
		if tc.cfg.Prefix == "" && !strings.Contains(tc.name, "prefix") {
			tc.cfg.Prefix = "/locktest/bad/"
		}
		began := time.Now()
		e, err := Connect(ctx, tc.cfg)
		took := time.Since(began)
		if e != nil || err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Connect = %v, %v; want one line with %q", tc.name, e, err, tc.want)
		}
		if took > 4*time.Second {
			t.Errorf("%s: Connect took %v", tc.name, took)
		}
	}
	silent.Close()
	notToxiproxy.Close()
	waitOwnGoroutines(t, before)
	if v := get(ctx, t, d, "/locktest/used/k"); v != "theirs" {
		t.Errorf("a failed Connect changed a key under its prefix: %q", v)
	}
}

// TestExternalRemoteToxiproxy: with a toxiproxy-server of its own (here one
// in this process, reached only through its URL), the member links are
// made there and deleted at Close, and nobody else's proxies are touched;
// the resource links stay in this process.
func TestExternalRemoteToxiproxy(t *testing.T) {
	t.Parallel()
	cfg := Config{}
	if _, err := os.Stat(debianEtcd); err == nil {
		cfg.EtcdBin = debianEtcd
	}
	c, ctx := startProcesses(t, cfg)
	remote, err := links.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	api := toxiclient.NewClient(remote.Addr())
	echo := startEcho(t)
	defer echo.Close()
	if _, err := api.CreateProxy("someone-else", "127.0.0.1:0", echo.Addr().String()); err != nil {
		t.Fatal(err)
	}

	e := connect(t, ctx, ExternalConfig{Endpoints: endpointsOf(c), Toxiproxy: "http://" + remote.Addr(), Prefix: "/locktest/remote/"})
	if v := regexp.MustCompile(`^etcd (\S+),`).FindStringSubmatch(e.Describe()); v == nil || v[1] != c.Etcd().Version {
		t.Errorf("Describe = %q, want the members' etcd %s", e.Describe(), c.Etcd().Version)
	}
	a, err := e.Client("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Client("b")
	if err != nil {
		t.Fatal(err)
	}
	ra, err := e.ResourceProxy("a", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	checkEcho(t, ra)
	epsA, err := e.Endpoints("a")
	if err != nil {
		t.Fatal(err)
	}
	proxies, err := api.Proxies()
	if err != nil {
		t.Fatal(err)
	}
	if len(proxies) != 1+6 {
		t.Errorf("the remote toxiproxy has %d proxies, want someone else's and 3 for each of a and b", len(proxies))
	}
	for i, m := range c.Members() {
		p, ok := proxies[e.token+"a->"+m.Name]
		if !ok || p.Listen != epsA[i] || p.Upstream != m.ClientAddr() {
			t.Errorf("a's link to %s on the remote toxiproxy: %+v, %v; want %s -> %s", m.Name, p, ok, epsA[i], m.ClientAddr())
		}
	}

	if err := putVia(ctx, a, "/locktest/remote/k", "v1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	linksA, err := e.Links("a")
	if err != nil {
		t.Fatal(err)
	}
	isolateAndHeal(t, ctx, e, linksA, a, b, "/locktest/remote/k")

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	proxies, err = api.Proxies()
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := proxies["someone-else"]; len(proxies) != 1 || !ok || !p.Enabled {
		t.Errorf("after Close the remote toxiproxy has %v, want only someone else's proxy, enabled", slices.Sorted(maps.Keys(proxies)))
	}
	checkRefused(t, append([]string{ra}, epsA...))
}

// isolateAndHeal blackholes a's links: a's requests time out while b writes
// key; after ClearToxics a reads what b wrote.
func isolateAndHeal(t *testing.T, ctx context.Context, e *External, linksA []*toxiclient.Proxy, a, b *clientv3.Client, key string) {
	t.Helper()
	blackhole(t, linksA)
	failsWithin(t, ctx, a, 500*time.Millisecond)
	// A put proposed while the members elect a leader (a loaded machine's
	// member processes miss heartbeats) is answered only at etcd's request
	// timeout, 5 s and two election timeouts: b's claim is that it
	// commits, not how soon.
	if err := putVia(ctx, b, key, "v2", 15*time.Second); err != nil {
		t.Fatalf("b, whose links are clear: %v", err)
	}
	if err := e.ClearToxics(); err != nil {
		t.Fatal(err)
	}
	reads(t, ctx, a, key, "v2")
}
