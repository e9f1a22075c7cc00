package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/test/poll"
)

// syncBuffer is a log a gateway writes from its calls' goroutines while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAClientThatLeavesIsCountedAndLogged has a client leave a call while it waits in the queue,
// after the call went out and before the provider answered, and in the middle of a stream: each
// is counted client_closed, never ok, and logged at info with the call's request id.
func TestAClientThatLeavesIsCountedAndLogged(t *testing.T) {
	tests := []struct {
		name, when string
		stream     bool
		// provider answers the call the client leaves; it returns once the gateway hangs up.
		provider http.HandlerFunc
		// queued holds the provider's only slot with another call first, so that the client's
		// call waits in the queue.
		queued bool
	}{{
		name: "mid-stream", when: "mid-stream", stream: true,
		provider: func(w http.ResponseWriter, r *http.Request) {
			sendStream(w, "Hello")
			<-r.Context().Done()
		},
	}, {
		name: "before the first byte", when: "before the provider answered",
		provider: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
	}, {
		name: "while queued", when: "while queued", queued: true,
		provider: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			received := make(chan struct{}, 2)
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body) // as a provider reads the call before it answers
				select {
				case received <- struct{}{}:
				default:
				}
				tc.provider(w, r)
			}))
			t.Cleanup(provider.Close)
			cfg := settleConfig(provider.URL)
			cfg.Providers[0].MaxInFlight = 1
			g := newSettleGatewayFrom(t, cfg)
			log := &syncBuffer{}
			g.log = slog.New(slog.NewTextHandler(log, nil))
			api := httptest.NewServer(g.Handler())
			t.Cleanup(api.Close)

			if tc.queued {
				holder, release := context.WithCancel(t.Context())
				defer release()
				go send(holder, api.URL, false, nil)
				<-received
			}
			ctx, leave := context.WithCancel(t.Context())
			defer leave()
			switch {
			case tc.stream: // once the stream's first chunk arrives
				send(ctx, api.URL, true, leave)
			case tc.queued: // once the call waits in the queue
				sent := make(chan struct{})
				go func() { send(ctx, api.URL, false, nil); close(sent) }()
				poll.Until(t, 10*time.Second, "the call to queue", func() bool { return g.gate.Queues().Providers[0].Queued == 1 })
				leave()
				<-sent
			default: // once the provider has the call
				go func() { <-received; leave() }()
				send(ctx, api.URL, false, nil)
			}

			closed := g.metrics.requests.WithLabelValues("acme", "lab", outcomeClientClosed)
			poll.Until(t, 10*time.Second, "the call to be counted client_closed", func() bool { return testutil.ToFloat64(closed) == 1 })
			if ok := testutil.ToFloat64(g.metrics.requests.WithLabelValues("acme", "lab", outcomeOK)); ok != 0 {
				t.Errorf("%v calls counted ok; want none", ok)
			}
			line := logLine(log.String(), "the client left")
			if !strings.Contains(line, "level=INFO") || !strings.Contains(line, tc.when) || !strings.Contains(line, "request_id=req_") {
				t.Errorf("log line %q; want it at info, saying when, with the call's request id", line)
			}
		})
	}
}

// send sends the settle table's call and reads its answer until it ends or ctx does, calling
// atFirstLine, when not nil, once the answer's first line has arrived.
func send(ctx context.Context, url string, stream bool, atFirstLine func()) {
	body := settleBody
	if stream {
		body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+settleKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if atFirstLine != nil {
			atFirstLine()
			atFirstLine = nil
		}
	}
}

// logLine returns the first line of log that holds s, or "".
func logLine(log, s string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
