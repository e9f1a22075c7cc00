package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// inFlightCalls is how many long calls TestCallInFlightHoldsItsBodyOnce holds at its provider at
// once: enough that what each holds stands out from what the gateway holds for all of them.
const inFlightCalls = 16

// TestCallInFlightHoldsItsBodyOnce holds long-prompt calls at their provider and weighs the heap
// they keep alive: a call in flight holds the body it sends, and not its prompt's texts besides,
// which would double what a long prompt costs while it queues and waits for its answer.
func TestCallInFlightHoldsItsBodyOnce(t *testing.T) {
	body := longPromptBody()
	arrived, release := make(chan struct{}), make(chan struct{})
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, benchReply)
	}))
	t.Cleanup(stub.Close)
	h := benchServer(t, stub.URL, nil)
	before := liveHeap()
	var calls sync.WaitGroup
	for u := range inFlightCalls {
		calls.Go(func() {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+benchKey(u%benchUsers))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Errorf("status %d: %s", w.Code, w.Body)
			}
		})
	}
	for range inFlightCalls {
		<-arrived
	}
	perCall := (liveHeap() - before) / inFlightCalls
	close(release)
	calls.Wait()
	const beyondBody = 64 << 10
	if limit := uint64(len(body) + beyondBody); perCall > limit {
		t.Errorf("a call in flight holds %d bytes of heap; want at most its body of %d bytes and %d more", perCall, len(body), beyondBody)
	}
}

// liveHeap is the heap that a collection leaves alive.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
