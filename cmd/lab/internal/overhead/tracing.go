package overhead

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// exportDelay is how often, in milliseconds, a traced gateway sends the spans it has batched
// (OTEL_BSP_SCHEDULE_DELAY): soon enough that a step's CPU time holds the sending of its own
// spans, which the SDK's default of 5 s would push into other targets' steps.
const exportDelay = 100

// untracedEnv keeps the untraced gateway untraced, whatever OTEL_* variables the lab runs with.
var untracedEnv = []string{"OTEL_SDK_DISABLED=true"}

// tracedTarget is the target of the gateway that samples share of its calls.
func tracedTarget(share float64) Target {
	return Target("gateway traced " + strconv.FormatFloat(share*100, 'f', -1, 64) + "%")
}

// tracedEnv is the environment of a gateway that samples share of its calls, by trace id, and
// sends their spans over OTLP/HTTP to endpoint.
func tracedEnv(endpoint string, share float64) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + endpoint,
		"OTEL_TRACES_SAMPLER=traceidratio",
		"OTEL_TRACES_SAMPLER_ARG=" + strconv.FormatFloat(share, 'f', -1, 64),
		"OTEL_BSP_SCHEDULE_DELAY=" + strconv.Itoa(exportDelay),
	}
}

// sink is an OTLP/HTTP trace receiver on loopback, in this process, that counts the spans each
// traced gateway sends to its own path and keeps none. Its methods are safe for concurrent use.
type sink struct {
	url    string
	server *http.Server
	mu     sync.Mutex
	spans  map[string]*atomic.Int64 // by path
}

// startSink starts a sink on a free loopback port.
func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("overhead: OTLP receiver: %w", err)
	}
	s := &sink{url: "http://" + ln.Addr().String(), spans: map[string]*atomic.Int64{}}
	s.server = &http.Server{Handler: http.HandlerFunc(s.receive)}
	go s.server.Serve(ln)
	return s, nil
}

// endpoint is the URL a gateway sends the spans of target to.
func (s *sink) endpoint(target Target) string {
	return s.url + "/" + url.PathEscape(string(target)) + "/v1/traces"
}

// received counts the spans sent to the endpoint of target so far.
func (s *sink) received(target Target) int64 {
	return s.counter("/" + string(target) + "/v1/traces").Load()
}

func (s *sink) counter(path string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spans[path] == nil {
		s.spans[path] = &atomic.Int64{}
	}
	return s.spans[path]
}

// receive counts the spans of one ExportTraceServiceRequest and answers it.
func (s *sink) receive(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(data, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var n int64
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += int64(len(ss.Spans))
		}
	}
	s.counter(r.URL.Path).Add(n)
	answer, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(answer)
}

// close stops the sink.
func (s *sink) close() { s.server.Close() }
