package zkserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Install is a ZooKeeper installation the servers run from: a java binary
// and the jars of QuorumPeerMain and a logger.
type Install struct {
	Java      string   // the java binary
	Classpath []string // jars, in order
}

// DebianClasspath are the jars of Debian's zookeeper package
// (libzookeeper-java): zookeeper.jar's manifest Class-Path names every jar
// it needs (jute, netty, jetty, jackson, slf4j-api, ...), so it is the
// only ZooKeeper jar to name. slf4j-api alone logs nothing (it warns once
// that it found no binding); slf4j-simple, from libslf4j-java, which the
// package depends on, logs to System.err, which the server's log file
// receives.
var DebianClasspath = []string{
	"/usr/share/java/zookeeper.jar",
	"/usr/share/java/slf4j-simple.jar",
}

// ErrNotInstalled says what to install.
var ErrNotInstalled = errors.New("ZooKeeper is not installed (apt-get install zookeeper)")

// Find finds java on PATH and checks the jars of classpath (nil: Debian's).
func Find(classpath []string) (Install, error) {
	if len(classpath) == 0 {
		classpath = DebianClasspath
	}
	for _, jar := range classpath {
		if _, err := os.Stat(jar); err != nil {
			return Install{}, fmt.Errorf("%w: %s is missing", ErrNotInstalled, jar)
		}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return Install{}, fmt.Errorf("%w: no java on PATH", ErrNotInstalled)
	}
	return Install{Java: java, Classpath: classpath}, nil
}

// jvmFlags keep a server small and quick to start: measured on a 2-core
// machine with Debian's OpenJDK 17, a server takes 0.5-1 s of CPU to serve
// (JVM boot and class loading; the election itself 0.3-0.4 s) and 56-58 MiB
// resident.
var jvmFlags = []string{
	"-Xms16m", "-Xmx128m", // the tree here is a few hundred znodes
	"-Xss512k",                // thread stacks (a server runs ~40 threads)
	"-XX:+UseSerialGC",        // no GC threads; pauses of a few ms on this heap
	"-XX:TieredStopAtLevel=1", // C1 only: a faster start, less code cache
	"-XX:CICompilerCount=1",
	"-XX:ReservedCodeCacheSize=32m",
	"-XX:MaxMetaspaceSize=64m",
	"-XX:-UsePerfData", // no /tmp/hsperfdata_* file: nothing outside the run
	"-XX:+ExitOnOutOfMemoryError",
	"-Djava.net.preferIPv4Stack=true",
	"-Dzookeeper.jmx.log4j.disable=true",
	"-Dzookeeper.preAllocSize=1024", // KiB; the transaction log grows by 64 MiB at a time by default
	// A server cut off for a while backs its election notifications off
	// up to 60 s by default and rejoins only at its next one after the
	// heal (3.9 s after a 10 s cut, measured); 1 s caps that (0.6-0.7 s).
	"-Dzookeeper.fastleader.maxNotificationInterval=1000",
	// The server's log is its stderr (slf4j-simple), opened by us for
	// appending: slf4j-simple's own logFile would truncate it on a restart.
	"-Dorg.slf4j.simpleLogger.showDateTime=true",
	"-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSXXX",
}

// args are the java arguments that run one server with the configuration
// at cfgPath, with more JVM flags.
func (in Install) args(cfgPath string, more []string) []string {
	args := append(append([]string{}, jvmFlags...), more...)
	return append(args, "-cp", strings.Join(in.Classpath, ":"),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
}

// ForTest is the installed ZooKeeper, or it skips t saying what to install.
func ForTest(t interface {
	Helper()
	Skip(args ...any)
}) Install {
	t.Helper()
	in, err := Find(nil)
	if err != nil {
		t.Skip("skipped: " + err.Error())
	}
	return in
}
