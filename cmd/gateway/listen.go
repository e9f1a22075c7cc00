package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/server"
)

// adminMaxConnections caps the connections the admin port holds at once: probes, Prometheus and
// the manager's reads of the usage snapshot need a few.
const adminMaxConnections = 64

// spareDescriptors are the file descriptors a gateway needs besides its connections: Redis, the
// configuration and key files, the log.
const spareDescriptors = 100

// endpoint is an http.Server and the listener it serves.
type endpoint struct {
	server   *http.Server
	listener net.Listener
}

// openEndpoints opens the API port and the admin port with the bounds of cfg. Both take cfg's
// timeouts and header limit; the API port holds at most cfg.MaxConnections connections, the
// admin port adminMaxConnections.
func openEndpoints(cfg gatewayv1.Server, api, admin string, apiHandler, adminHandler http.Handler) ([]endpoint, error) {
	apiListener, err := limitedListener(api, int(cfg.MaxConnections))
	if err != nil {
		return nil, err
	}
	adminListener, err := limitedListener(admin, adminMaxConnections)
	if err != nil {
		apiListener.Close()
		return nil, err
	}
	watched := server.WatchFolds(apiListener) // the API's handlers refuse a folded Authorization
	return []endpoint{
		{newHTTPServer(cfg, api, apiHandler, apiListener), watched},
		{newHTTPServer(cfg, admin, adminHandler, adminListener), adminListener},
	}, nil
}

// limitedListener listens on addr and holds at most n connections at once (see connLimit).
func limitedListener(addr string, n int) (*connLimit, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return newConnLimit(l, n), nil
}

// newHTTPServer serves handler with cfg's bounds on what a client may hold: the time to send its
// headers, and its whole request, the time a kept-alive connection may stay idle, and the size
// of its headers. ReadTimeout is the connection's read deadline until the body has been read to
// its end, when net/http lifts it to watch for a client that leaves, so it never cuts a stream;
// a body left unread (a call refused before it is read) stays under it while the server drains
// it. There is no WriteTimeout: a streamed answer may take many minutes. The listener learns
// which connections are idle between requests.
func newHTTPServer(cfg gatewayv1.Server, addr string, handler http.Handler, l *connLimit) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout.Duration,
		ReadTimeout:       cfg.ReadTimeout.Duration,
		IdleTimeout:       cfg.IdleTimeout.Duration,
		MaxHeaderBytes:    int(cfg.MaxHeaderBytes),
		ConnState:         l.track,
		ConnContext:       server.ConnContext,
	}
}

// descriptorsNeeded is how many file descriptors cfg lets a gateway hold at most: each client
// connection, one connection to a provider for each call in flight, and the spare ones.
func descriptorsNeeded(cfg gatewayv1.Server) uint64 {
	return uint64(cfg.MaxConnections) + uint64(cfg.MaxInFlight) + adminMaxConnections + spareDescriptors
}

// warnDescriptors warns when cfg lets the gateway hold more file descriptors than the process
// may open: past that limit a call fails with "too many open files" rather than a clean 503.
func warnDescriptors(cfg gatewayv1.Server, log *slog.Logger) {
	limit, ok := descriptorLimit()
	if need := descriptorsNeeded(cfg); ok && need > limit {
		log.Warn("server.maxConnections and server.maxInFlight allow more open files than the process may open: lower them, or raise the limit (ulimit -n)",
			"needed", need, "limit", limit, "maxConnections", cfg.MaxConnections, "maxInFlight", cfg.MaxInFlight)
	}
}
