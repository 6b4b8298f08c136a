package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Config describes the cluster to start. The zero value is usable: a
// 3-member cluster with 10 ms heartbeats and a 100 ms election timeout, data
// in a fresh directory under os.TempDir, logs discarded.
type Config struct {
	// Members is the number of etcd members (default 3). Odd sizes 1..9.
	Members int

	// Processes runs each member as an OS process instead of in this
	// process: EtcdBin, or the etcd built into locktest when EtcdBin is
	// empty (see process.go).
	Processes bool
	// EtcdBin is the etcd binary process members run (see FindEtcd).
	EtcdBin string

	// TLS, when set, makes process members serve their client URLs over
	// TLS (https) and require client certificates, as a team's own
	// cluster may. The cluster's own clients present the same certificate.
	TLS *TLSFiles

	// Dir is the run directory. The members' data directories are created in
	// a fresh temporary directory inside Dir (or inside os.TempDir when Dir
	// is empty); that temporary directory is removed by Close.
	Dir string

	// LogDir receives one zap JSON log per member, "etcd-<name>.log", and
	// toxiproxy's zerolog log, "toxiproxy.log". Existing files are
	// truncated. When LogDir is empty Dir is used; when both are empty all
	// logs are discarded.
	LogDir string

	// TickMs is the raft heartbeat interval in milliseconds (default 10).
	TickMs uint
	// ElectionMs is the raft election timeout in milliseconds (default 100,
	// must be at least 5*TickMs).
	ElectionMs uint

	// SnapshotCount is the number of committed entries that triggers a
	// snapshot (default 10000, etcd's default).
	SnapshotCount uint64

	// QuotaBackendBytes is the backend size quota (default 256 MiB).
	QuotaBackendBytes int64

	// UnsafeNoFsync disables fsync of the WAL and backend. Members share a
	// process (and its page cache), so in-process crashes (HardStop) do not
	// lose unsynced writes either way; this only trades durability against a
	// machine crash for speed.
	UnsafeNoFsync bool

	// StartTimeout bounds Start when its context has no deadline
	// (default 30 s).
	StartTimeout time.Duration
}

const (
	defaultMembers       = 3
	defaultTickMs        = 10
	defaultElectionMs    = 100
	defaultSnapshotCount = 10000
	defaultQuotaBytes    = 256 << 20
	defaultStartTimeout  = 30 * time.Second
)

func (c Config) withDefaults() (Config, error) {
	if c.Members == 0 {
		c.Members = defaultMembers
	}
	if err := CheckMembers(c.Members); err != nil {
		return c, fmt.Errorf("cluster: %w", err)
	}
	if c.TickMs == 0 {
		c.TickMs = defaultTickMs
	}
	if c.ElectionMs == 0 {
		c.ElectionMs = defaultElectionMs
	}
	if c.ElectionMs < 5*c.TickMs {
		return c, fmt.Errorf("cluster: ElectionMs (%d) must be at least 5*TickMs (%d)", c.ElectionMs, 5*c.TickMs)
	}
	if c.SnapshotCount == 0 {
		c.SnapshotCount = defaultSnapshotCount
	}
	if c.QuotaBackendBytes == 0 {
		c.QuotaBackendBytes = defaultQuotaBytes
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = defaultStartTimeout
	}
	if c.LogDir == "" {
		c.LogDir = c.Dir
	}
	if c.EtcdBin != "" && !c.Processes {
		return c, errors.New("cluster: an etcd binary runs as processes only (Processes)")
	}
	if c.TLS != nil && !c.Processes {
		return c, errors.New("cluster: TLS is for process members only (Processes)")
	}
	return c, nil
}

// TLSFiles are the PEM files of a TLS cluster: the members' certificate
// and key (etcd's --cert-file and --key-file), which the cluster's own
// clients present too, so the certificate must name 127.0.0.1 and allow
// both server and client authentication; and the CA that signed it
// (--trusted-ca-file), which members check client certificates against
// and clients check the members' against.
type TLSFiles struct {
	CertFile, KeyFile, TrustedCAFile string
}

// clientTLS is the TLS configuration of the cluster's own clients; nil
// without TLS.
func (f *TLSFiles) clientTLS() (*tls.Config, error) {
	if f == nil {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: TLS: %w", err)
	}
	ca, err := os.ReadFile(f.TrustedCAFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: TLS: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("cluster: TLS: no PEM certificate in %s", f.TrustedCAFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// MemberName names member i (from 0) of a cluster locktest runs: m0, m1,
// ...; an external cluster's member whose own name cannot be used.
func MemberName(i int) string { return "m" + strconv.Itoa(i) }

// CheckMembers says whether n is a cluster size locktest runs: 3 or 5. The
// fault schedules are drawn for these (5 adds the ring and bridge
// partitions); an even size only adds a member that cannot break a tie.
func CheckMembers(n int) error {
	if n != 3 && n != 5 {
		return fmt.Errorf("members must be 3 or 5, got %d", n)
	}
	return nil
}
