package cluster

import (
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"

	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logFile is an optional log destination; a nil *logFile discards.
type logFile struct {
	f *os.File
}

func openLog(dir, name string) (*logFile, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &logFile{f: f}, nil
}

func (l *logFile) writer() io.Writer {
	if l == nil {
		return io.Discard
	}
	return l.f
}

// zap returns a JSON zap logger writing to the file, formatted like etcd's
// own default logger.
func (l *logFile) zap() *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	ws := zapcore.Lock(zapcore.AddSync(l.f))
	enc := zapcore.NewJSONEncoder(logutil.DefaultZapLoggerConfig.EncoderConfig)
	core := zapcore.NewCore(enc, ws, zap.NewAtomicLevelAt(zap.InfoLevel))
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(ws))
}

// stdlog is for net/http's ErrorLog, which otherwise prints to stderr.
func (l *logFile) stdlog(prefix string) *log.Logger {
	return log.New(l.writer(), prefix, log.LstdFlags|log.Lmicroseconds)
}

func (l *logFile) close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

// quietGlobals silences the process-global loggers of our dependencies,
// once per process. Every cluster has its own file loggers; these globals
// cannot be per cluster.
//
//   - zerolog's global log.Logger writes to stderr. toxiproxy's bandwidth
//     toxic logs through it (everything else in toxiproxy uses the logger we
//     give the ApiServer), so it is pointed at nothing.
//
// grpc's global logger (grpclog) is deliberately left alone: by default it
// writes only ERROR-severity messages to stderr, and none appeared while
// starting, partitioning (timeout toxics, disabled proxies) and closing
// clusters (see TestNoTerminalOutput). We do not call
// embed.Config.SetupGlobalLoggers either, since it would replace grpclog and
// zap's globals with one member's logger.
var quietGlobals = sync.OnceFunc(func() {
	zlog.Logger = zerolog.Nop()
})
