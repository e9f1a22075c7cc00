package openai

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteReply(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want string
	}{{
		name: "chat",
		req:  Request{Endpoint: Chat, Model: "m", PromptTokens: 3, CompletionTokens: 2, Capped: true},
		want: `{"id":"chatcmpl-7","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"the lab "},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
	}, {
		name: "completions",
		req:  Request{Endpoint: Completions, Model: "m", PromptTokens: 3, CompletionTokens: 1},
		want: `{"id":"cmpl-7","object":"text_completion","created":1700000000,"model":"m","choices":[{"index":0,"text":"the ","finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
	}, {
		name: "embeddings",
		req:  Request{Endpoint: Embeddings, Model: "e", PromptTokens: 3, Inputs: 1},
		want: `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25]}],"model":"e","usage":{"prompt_tokens":3,"total_tokens":3}}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			WriteReply(w, tc.req.Endpoint, NewReply(tc.req, 7, 1_700_000_000))
			got := []string{w.Header().Get("Content-Type"), strings.TrimSpace(w.Body.String())}
			if diff := cmp.Diff(got, []string{"application/json", tc.want}); diff != "" {
				t.Errorf("answer mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestWriteReplyDetails(t *testing.T) {
	rep := Reply{ID: "chatcmpl-7", Created: 1_700_000_000, Model: "o3", Text: "the ", FinishReason: "stop", ServiceTier: TierFlex,
		Usage: Usage{PromptTokens: 2000, CompletionTokens: 151, TotalTokens: 2151,
			PromptTokensDetails:     &PromptTokensDetails{CachedTokens: 1024, AudioTokens: 500},
			CompletionTokensDetails: &CompletionTokensDetails{ReasoningTokens: 100, AudioTokens: 50}}}
	want := `{"id":"chatcmpl-7","object":"chat.completion","created":1700000000,"model":"o3","service_tier":"flex",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"the "},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":2000,"completion_tokens":151,"total_tokens":2151,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":500},` +
		`"completion_tokens_details":{"reasoning_tokens":100,"audio_tokens":50,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`
	w := httptest.NewRecorder()
	WriteReply(w, Chat, rep)
	if got := strings.TrimSpace(w.Body.String()); got != want {
		t.Errorf("answer =\n%s\nwant\n%s", got, want)
	}
}

func TestWriteStream(t *testing.T) {
	const envelope = `{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1700000000,"model":"m",`
	const completion = `{"id":"cmpl-7","object":"text_completion","created":1700000000,"model":"m",`
	tests := []struct {
		name string
		req  Request
		want []string
	}{{
		name: "chat with the usage chunk, in two chunks of text",
		req:  Request{Endpoint: Chat, Model: "m", Stream: true, IncludeUsage: true, PromptTokens: 3, CompletionTokens: 17},
		want: []string{
			envelope + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			envelope + `"choices":[{"index":0,"delta":{"content":"` + Filler(16) + `"},"finish_reason":null}]}`,
			envelope + `"choices":[{"index":0,"delta":{"content":"the "},"finish_reason":null}]}`,
			envelope + `"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			envelope + `"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":17,"total_tokens":20}}`,
			`[DONE]`,
		},
	}, {
		name: "chat without the usage chunk unless asked",
		req:  Request{Endpoint: Chat, Model: "m", Stream: true, PromptTokens: 3, CompletionTokens: 1, Capped: true},
		want: []string{
			envelope + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			envelope + `"choices":[{"index":0,"delta":{"content":"the "},"finish_reason":null}]}`,
			envelope + `"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
			`[DONE]`,
		},
	}, {
		name: "completions",
		req:  Request{Endpoint: Completions, Model: "m", Stream: true, IncludeUsage: true, PromptTokens: 3, CompletionTokens: 1},
		want: []string{
			completion + `"choices":[{"index":0,"text":"the ","finish_reason":null}]}`,
			completion + `"choices":[{"index":0,"text":"","finish_reason":"stop"}]}`,
			completion + `"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
			`[DONE]`,
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			if err := WriteStream(w, tc.req, NewReply(tc.req, 7, 1_700_000_000), nil); err != nil {
				t.Fatalf("WriteStream() error = %v", err)
			}
			if got := w.Header().Get("Content-Type"); got != "text/event-stream" {
				t.Errorf("Content-Type = %q; want text/event-stream", got)
			}
			if diff := cmp.Diff(events(t, w.Body.String()), tc.want); diff != "" {
				t.Errorf("events mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestWriteStreamPauses(t *testing.T) {
	req := Request{Endpoint: Chat, Model: "m", Stream: true, CompletionTokens: 40}
	stop := errors.New("client left")
	var got [][2]int
	pause := func(i, n int) error {
		got = append(got, [2]int{i, n})
		if i == 1 {
			return stop
		}
		return nil
	}
	w := httptest.NewRecorder()
	if err := WriteStream(w, req, NewReply(req, 1, 0), pause); !errors.Is(err, stop) {
		t.Errorf("WriteStream() error = %v; want %v", err, stop)
	}
	if diff := cmp.Diff(got, [][2]int{{0, 3}, {1, 3}}); diff != "" {
		t.Errorf("pauses mismatch (-got +want):\n%s", diff)
	}
	if n := len(events(t, w.Body.String())); n != 2 {
		t.Errorf("%d events before the stop; want 2 (the role and one chunk of text)", n)
	}
}

// events splits a body of server-sent events into their data.
func events(t *testing.T, body string) []string {
	t.Helper()
	var data []string
	for ev := range strings.SplitSeq(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		d, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %q has no data", ev)
		}
		data = append(data, d)
	}
	return data
}

func TestErrorBody(t *testing.T) {
	w := httptest.NewRecorder()
	UnknownModel("gpt-9").Write(w)
	got := []any{w.Code, strings.TrimSpace(w.Body.String())}
	want := []any{http.StatusBadRequest, `{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("answer mismatch (-got +want):\n%s", diff)
	}
}

func TestResponseObject(t *testing.T) {
	echo := Echo{}.withDefaults()
	tests := []struct {
		name string
		r    Response
		want string // the fields before the echoed ones
	}{{
		name: "queued",
		r:    Response{ID: "resp_1", CreatedAt: 1_700_000_000, Status: StatusQueued, Background: true, Store: true, Model: "m", MessageID: "msg_1", Echo: echo},
		want: `{"id":"resp_1","object":"response","created_at":1700000000,"status":"queued","background":true,"completed_at":null,"error":null,` +
			`"incomplete_details":null,"model":"m","output":[],"service_tier":"default","store":true,"usage":null,"conversation":null,"prompt":null,` +
			`"access_programs":{"cyber":"standard"},`,
	}, {
		name: "completed at a tier, with cached input and reasoning",
		r: Response{ID: "resp_1", CreatedAt: 1_700_000_000, Status: StatusCompleted, Store: true, Model: "m", MessageID: "msg_1", ServiceTier: TierPriority,
			Text: "the ", Usage: &ResponseUsage{InputTokens: 1030, CachedTokens: 1024, OutputTokens: 101, ReasoningTokens: 100}, CompletedAt: 1_700_000_002, Echo: echo},
		want: `{"id":"resp_1","object":"response","created_at":1700000000,"status":"completed","background":false,"completed_at":1700000002,"error":null,` +
			`"incomplete_details":null,"model":"m","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant",` +
			`"content":[{"type":"output_text","text":"the ","annotations":[],"logprobs":[]}]}],"service_tier":"priority","store":true,` +
			`"usage":{"input_tokens":1030,"input_tokens_details":{"cached_tokens":1024,"cache_write_tokens":0},"output_tokens":101,` +
			`"output_tokens_details":{"reasoning_tokens":100},"total_tokens":1131},"conversation":null,"prompt":null,"access_programs":{"cyber":"standard"},`,
	}, {
		name: "cancelled with some text",
		r: Response{ID: "resp_1", CreatedAt: 1_700_000_000, Status: StatusCancelled, Background: true, Store: true, Model: "m", MessageID: "msg_1",
			Text: "the ", Usage: &ResponseUsage{InputTokens: 3, OutputTokens: 1}, Echo: echo},
		want: `{"id":"resp_1","object":"response","created_at":1700000000,"status":"cancelled","background":true,"completed_at":null,"error":null,` +
			`"incomplete_details":null,"model":"m","output":[{"id":"msg_1","type":"message","status":"incomplete","role":"assistant",` +
			`"content":[{"type":"output_text","text":"the ","annotations":[],"logprobs":[]}]}],"service_tier":"default","store":true,` +
			`"usage":{"input_tokens":3,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":1,` +
			`"output_tokens_details":{"reasoning_tokens":0},"total_tokens":4},"conversation":null,"prompt":null,"access_programs":{"cyber":"standard"},`,
	}, {
		name: "failed",
		r:    Response{ID: "resp_1", CreatedAt: 1_700_000_000, Status: StatusFailed, Background: true, Store: true, Model: "m", MessageID: "msg_1", Failure: "gone", Echo: echo},
		want: `{"id":"resp_1","object":"response","created_at":1700000000,"status":"failed","background":true,"completed_at":null,` +
			`"error":{"code":"server_error","message":"gone"},"incomplete_details":null,"model":"m","output":[],"service_tier":"default","store":true,` +
			`"usage":null,"conversation":null,"prompt":null,"access_programs":{"cyber":"standard"},`,
	}}
	echoed, _ := json.Marshal(echo)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want + string(echoed[1:]); string(got) != want {
				t.Errorf("Response JSON =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestResponseEvents(t *testing.T) {
	var e ResponseEvents
	r := Response{ID: "resp_1", Status: StatusQueued, Background: true, Model: "m", MessageID: "msg_1", Echo: Echo{}.withDefaults()}
	events := e.Start(r)
	r.Text, r.Status, r.Usage = "the ", StatusCompleted, &ResponseUsage{InputTokens: 1, OutputTokens: 1}
	events = append(events, e.Delta(r, "the "))
	events = append(events, e.Finish(r)...)
	var got []string
	for i, ev := range events {
		var head struct {
			Type     string `json:"type"`
			Sequence int64  `json:"sequence_number"`
			Response *struct {
				Status string `json:"status"`
			} `json:"response"`
			ItemID string `json:"item_id"`
			Delta  string `json:"delta"`
		}
		if err := json.Unmarshal(ev.Data, &head); err != nil {
			t.Fatal(err)
		}
		if head.Type != ev.Type || head.Sequence != int64(i) || ev.Sequence != int64(i) {
			t.Errorf("event %d is %s, number %d in its JSON and %d; want its type and %d", i, ev.Type, head.Sequence, ev.Sequence, i)
		}
		line := head.Type
		if head.Response != nil {
			line += " " + head.Response.Status
		}
		if head.ItemID != "" {
			line += " " + head.ItemID + " " + head.Delta
		}
		got = append(got, strings.TrimSpace(line))
	}
	want := []string{
		"response.created queued", "response.in_progress in_progress", "response.output_item.added", "response.content_part.added msg_1",
		"response.output_text.delta msg_1 the", "response.output_text.done msg_1", "response.content_part.done msg_1",
		"response.output_item.done", "response.completed completed",
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("events mismatch (-got +want):\n%s", diff)
	}
}
