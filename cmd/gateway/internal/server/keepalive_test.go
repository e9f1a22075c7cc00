package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAStreamThatWaitsInTheQueueIsKeptAlive queues a streamed call behind another that holds
// the provider's only slot, until its client has received a keepalive comment: its status and
// headers went with it, and what the provider answers after goes in the stream, an answer as
// it comes and an error as the event OpenAI's SDK raises.
func TestAStreamThatWaitsInTheQueueIsKeptAlive(t *testing.T) {
	tests := []struct {
		name   string
		answer http.HandlerFunc
		// check is what the official SDK reads of the stream the client received.
		check func(t *testing.T, content string, err error)
	}{{
		name: "answered",
		answer: func(w http.ResponseWriter, r *http.Request) {
			sendStream(w, "Hello")
			io.WriteString(w, "data: [DONE]\n\n")
		},
		check: func(t *testing.T, content string, err error) {
			if err != nil || content != "Hello" {
				t.Errorf("the SDK read %q and %v; want the provider's answer, Hello, and no error", content, err)
			}
		},
	}, {
		name: "refused by the provider",
		answer: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "{\"error\": {\"message\": \"Unsupported value: 'temperature'.\",\n \"type\": \"invalid_request_error\", \"code\": \"unsupported_value\"}}")
		},
		check: func(t *testing.T, content string, err error) {
			var streamErr *ssestream.StreamError
			if !errors.As(err, &streamErr) || !strings.Contains(streamErr.Message, "Unsupported value") || content != "" {
				t.Errorf("the SDK read %q and %v; want the provider's error raised from the stream", content, err)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			held, release := make(chan struct{}), make(chan struct{})
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if !bytes.Contains(body, []byte(`"stream":true`)) { // the call that holds the slot
					close(held)
					<-release
					io.WriteString(w, `{"choices":[{"message":{"content":"Hi"}}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`)
					return
				}
				tc.answer(w, r)
			}))
			t.Cleanup(provider.Close)
			cfg := settleConfig(provider.URL)
			cfg.Providers[0].MaxInFlight = 1
			cfg.Server.StreamKeepalive = metav1.Duration{Duration: 10 * time.Millisecond}
			g := newSettleGatewayFrom(t, cfg)
			api := httptest.NewServer(g.Handler())
			t.Cleanup(api.Close)
			go send(t.Context(), api.URL, false, nil)
			<-held

			resp := postStream(t, api.URL)
			defer resp.Body.Close()
			var received bytes.Buffer
			lines := bufio.NewReader(io.TeeReader(resp.Body, &received))
			first, _ := lines.ReadString('\n')
			close(release) // the stream has had its first keepalive: let the call through
			io.Copy(io.Discard, lines)

			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Errorf("answered %d %q; want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if first != ": queued\n" {
				t.Errorf("the stream began %q; want the queue's keepalive comment", first)
			}
			content, err := readWithSDK(received.Bytes())
			tc.check(t, content, err)
		})
	}
}

// postStream sends the settle table's call, streamed, and returns its answer as it begins.
func postStream(t *testing.T, url string) *http.Response {
	body := strings.Replace(settleBody, `{"model"`, `{"stream":true,"model"`, 1)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+settleKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readWithSDK reads a chat stream as received with OpenAI's Go SDK, and returns its content and
// the error the SDK raised.
func readWithSDK(received []byte) (string, error) {
	resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(received))}
	stream := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(resp), nil)
	var content strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	return content.String(), stream.Err()
}
