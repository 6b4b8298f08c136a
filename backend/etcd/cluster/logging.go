package cluster

import (
	"log"
	"sync"

	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/locktest/locktest/backend/serverkit"
)

// zapLogger returns a JSON zap logger writing to l (nowhere when nil),
// formatted like etcd's own default logger.
func zapLogger(l *serverkit.LogWriter) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	ws := zapcore.Lock(zapcore.AddSync(l))
	enc := zapcore.NewJSONEncoder(logutil.DefaultZapLoggerConfig.EncoderConfig)
	core := zapcore.NewCore(enc, ws, zap.NewAtomicLevelAt(zap.InfoLevel))
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(ws))
}

// stdLogger is for net/http's ErrorLog, which otherwise prints to stderr.
func stdLogger(l *serverkit.LogWriter, prefix string) *log.Logger {
	return log.New(l, prefix, log.LstdFlags|log.Lmicroseconds)
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
