package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// page20 is a 20-byte input: 5 tokens.
const page20 = `"Summarise this page."`

// object is the part of a Response object the tests read.
type object struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Status             string  `json:"status"`
	Background         bool    `json:"background"`
	Store              bool    `json:"store"`
	PreviousResponseID *string `json:"previous_response_id"`
	Output             []struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Status  string `json:"status"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage *usage `json:"usage"`
}

// usage is a Response's usage as the tests read it.
type usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// text is the text of the object's output.
func (o object) text() string {
	var s strings.Builder
	for _, m := range o.Output {
		for _, c := range m.Content {
			s.WriteString(c.Text)
		}
	}
	return s.String()
}

// call sends a request to the provider at url with the test key and
// returns the answer's status and body.
func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	resp, data := do(t, method, url, testKey, body)
	return resp.StatusCode, data
}

// create posts body to /v1/responses, wants 200 and returns the object.
func create(t *testing.T, url, body string) object {
	t.Helper()
	status, data := call(t, http.MethodPost, url+"/v1/responses", body)
	if status != http.StatusOK {
		t.Fatalf("POST /v1/responses %s: %d %s; want 200", body, status, data)
	}
	return decode[object](t, data)
}

// get reads the response id, wants 200 and returns the object.
func get(t *testing.T, url, id string) object {
	t.Helper()
	status, data := call(t, http.MethodGet, url+"/v1/responses/"+id, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/responses/%s: %d %s; want 200", id, status, data)
	}
	return decode[object](t, data)
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return v
}

// ended waits until the background response id has ended.
func ended(t *testing.T, p *Server, id string) {
	t.Helper()
	r := p.responses.get(id)
	if r == nil {
		t.Fatalf("response %s is not kept", id)
	}
	receive(t, r.done, "end of response "+id)
}

// pacer is a Sleep that lets the first free pauses pass at once and holds
// each later one until the test releases them all, or its ctx ends. It
// says when it holds a pause.
type pacer struct {
	mu   sync.Mutex
	free int
	held chan struct{}
	open chan struct{}
}

func newPacer(free int) *pacer {
	return &pacer{free: free, held: make(chan struct{}, 100), open: make(chan struct{})}
}

func (p *pacer) sleep(ctx context.Context, _ time.Duration) error {
	p.mu.Lock()
	pass := p.free > 0
	p.free--
	p.mu.Unlock()
	if pass {
		return ctx.Err()
	}
	p.held <- struct{}{}
	select {
	case <-p.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pacer) release() { close(p.open) }

func TestResponseAnswers(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantInput int64
	}{
		{"what the body shows", `{"model":"gpt-4o","input":` + page20 + `,"max_output_tokens":40}`, 5},
		{"files the provider reads", `{"model":"gpt-4o","max_output_tokens":40,"input":[{"role":"user","content":[{"type":"input_text","text":` + page20 + `},` +
			`{"type":"input_file","file_id":"file-1"},{"type":"input_file","file_url":"https://example.com/a.pdf"}]}]}`, 5 + 2*1000},
		{"searches the provider makes", `{"model":"gpt-4o","input":` + page20 + `,"max_output_tokens":40,"tools":[{"type":"file_search","vector_store_ids":["vs_1"]},{"type":"web_search"}]}`,
			openai.TokensOfBytes(20+len(`{"type":"file_search","vector_store_ids":["vs_1"]}{"type":"web_search"}`)) + 2*100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, srv, _ := start(t, func(o *Options) { o.FileTokens, o.ToolTokens = 1000, 100 })
			got := create(t, srv.URL, tc.body)
			want := usage{InputTokens: tc.wantInput, OutputTokens: 40, TotalTokens: tc.wantInput + 40}
			if got.Status != "completed" || got.Usage == nil || *got.Usage != want {
				t.Errorf("status %s, usage %+v; want completed, %+v", got.Status, got.Usage, want)
			}
			if n := openai.TokensOf(got.text()); n != 40 {
				t.Errorf("output is %d tokens; want 40", n)
			}
			bill := Bill{InputTokens: tc.wantInput, OutputTokens: 40, MicroDollars: 3 * (tc.wantInput + 40)}
			wantStats := Stats{Accepted: 1, MaxInFlightSeen: 1, PromptTokens: bill.InputTokens, CompletionTokens: 40, MicroDollars: bill.MicroDollars,
				Tiers:     TierBills{Default: bill},
				Received:  map[string]int64{"POST /v1/responses": 1},
				Responses: ResponsesStats{Stored: 1, Completed: 1, Foreground: bill}}
			if diff := cmp.Diff(p.Stats(), wantStats); diff != "" {
				t.Errorf("Stats() mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestResponseChain(t *testing.T) {
	p, srv, _ := start(t, nil)
	first := create(t, srv.URL, `{"model":"gpt-4o","input":`+page20+`,"max_output_tokens":16}`)
	second := create(t, srv.URL, `{"model":"gpt-4o","input":"Go on.","max_output_tokens":16,"previous_response_id":"`+first.ID+`"}`)
	third := create(t, srv.URL, `{"model":"gpt-4o","input":"Go on.","max_output_tokens":16,"previous_response_id":"`+second.ID+`"}`)
	got := []int64{first.Usage.InputTokens, second.Usage.InputTokens, third.Usage.InputTokens}
	// Each input is what its body shows and the whole chain before it.
	want := []int64{5, 2 + 5 + 16, 2 + (2 + 5 + 16) + 16}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("input tokens mismatch (-got +want):\n%s", diff)
	}
	if *third.PreviousResponseID != second.ID {
		t.Errorf("previous_response_id = %s; want %s", *third.PreviousResponseID, second.ID)
	}
	if st := p.Stats(); st.PromptTokens != 5+23+41 || st.CompletionTokens != 3*16 {
		t.Errorf("billed %d input and %d output tokens; want %d and %d", st.PromptTokens, st.CompletionTokens, 5+23+41, 3*16)
	}
}

func TestResponseNotFound(t *testing.T) {
	p, srv, _ := start(t, nil)
	unstored := create(t, srv.URL, `{"model":"gpt-4o","input":"hi","store":false}`)
	deleted := create(t, srv.URL, `{"model":"gpt-4o","input":"hi"}`)
	if status, body := call(t, http.MethodDelete, srv.URL+"/v1/responses/"+deleted.ID, ""); status != 200 ||
		strings.TrimSpace(string(body)) != `{"id":"`+deleted.ID+`","object":"response.deleted","deleted":true}` {
		t.Errorf("DELETE: %d %s; want 200 and the deletion", status, body)
	}
	notFound := func(id string) string {
		return `{"error":{"message":"Response with id '` + id + `' not found.","type":"invalid_request_error","param":null,"code":null}}`
	}
	previousNotFound := func(id string) string {
		return `{"error":{"message":"Previous response with id '` + id + `' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`
	}
	received := p.Stats().Received
	for _, id := range []string{"resp_nothing", unstored.ID, deleted.ID} {
		for _, tc := range []struct{ method, path, body, want string }{
			{http.MethodGet, "/v1/responses/" + id, "", notFound(id)},
			{http.MethodDelete, "/v1/responses/" + id, "", notFound(id)},
			{http.MethodPost, "/v1/responses/" + id + "/cancel", "", notFound(id)},
			{http.MethodGet, "/v1/responses/" + id + "/input_items", "", notFound(id)},
			{http.MethodPost, "/v1/responses", `{"model":"gpt-4o","input":"hi","previous_response_id":"` + id + `"}`, previousNotFound(id)},
		} {
			status, body := call(t, tc.method, srv.URL+tc.path, tc.body)
			if got := strings.TrimSpace(string(body)); status != http.StatusNotFound || got != tc.want {
				t.Errorf("%s %s: %d %s; want 404 %s", tc.method, tc.path, status, got, tc.want)
			}
		}
	}
	st := p.Stats()
	if st.Accepted != 2 {
		t.Errorf("accepted %d calls; want the 2 created, none of those not found", st.Accepted)
	}
	for _, route := range []string{"GET /v1/responses/{id}", "DELETE /v1/responses/{id}", "POST /v1/responses/{id}/cancel", "GET /v1/responses/{id}/input_items", "POST /v1/responses"} {
		if got := st.Received[route] - received[route]; got != 3 {
			t.Errorf("%s received %d requests; want 3", route, got)
		}
	}
}

func TestResponseRefusals(t *testing.T) {
	_, srv, _ := start(t, func(o *Options) { o.TokensPerMinute = 1000 })
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantParam  string
		wantWord   string
	}{
		{"an unknown model", `{"model":"gpt-9","input":"hi"}`, 400, "model", "does not exist"},
		{"background that is not stored", `{"model":"gpt-4o","input":"hi","background":true,"store":false}`, 400, "background", "requires store=true"},
		{"a file larger than the minute", `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}]}`, 429, "", "Request too large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, http.MethodPost, srv.URL+"/v1/responses", tc.body)
			e := errorOf(t, body)
			if status != tc.wantStatus || (e.Param == nil) != (tc.wantParam == "") || e.Param != nil && *e.Param != tc.wantParam || !strings.Contains(e.Message, tc.wantWord) {
				t.Errorf("%d %s; want %d, param %q and %q in the message", status, body, tc.wantStatus, tc.wantParam, tc.wantWord)
			}
		})
	}
}

func TestAzureServesNoResponses(t *testing.T) {
	_, srv, _ := start(t, func(o *Options) { o.AzureAPIVersion = "2024-10-21" })
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/responses", strings.NewReader(`{"model":"gpt-4o","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Api-Key", testKey)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /v1/responses on Azure: %d; want 404", resp.StatusCode)
	}
}

func TestBackgroundBilledAtItsEnd(t *testing.T) {
	pace := newPacer(0)
	p, srv, _ := start(t, func(o *Options) { o.Sleep = pace.sleep })
	queued := create(t, srv.URL, `{"model":"gpt-4o","input":`+page20+`,"max_output_tokens":40,"background":true}`)
	if queued.Status != "queued" || queued.Usage != nil || len(queued.Output) != 0 || !queued.Background || !queued.Store {
		t.Errorf("answer %+v; want queued, background, stored, no usage and no output", queued)
	}
	receive(t, pace.held, "first pause")
	before := p.Stats()
	if before.InFlight != 1 || before.Accepted != 1 || before.MicroDollars != 0 || before.PromptTokens != 0 {
		t.Errorf("while it runs: Stats() = %+v; want it admitted and in flight, nothing billed", before)
	}
	if got := get(t, srv.URL, queued.ID); got.Status != "in_progress" || got.Usage != nil {
		t.Errorf("while it runs: status %s, usage %+v; want in_progress and none", got.Status, got.Usage)
	}

	pace.release()
	ended(t, p, queued.ID)
	bill := Bill{InputTokens: 5, OutputTokens: 40, MicroDollars: 3 * 45}
	want := before
	want.InFlight, want.PromptTokens, want.CompletionTokens, want.MicroDollars = 0, 5, 40, 3*45
	want.Received = map[string]int64{"POST /v1/responses": 1, "GET /v1/responses/{id}": 1}
	want.Responses.BackgroundCompleted, want.Responses.Background, want.Tiers.Default = 1, bill, bill
	if diff := cmp.Diff(p.Stats(), want); diff != "" {
		t.Errorf("Stats() after its end mismatch (-got +want):\n%s", diff)
	}
	done := get(t, srv.URL, queued.ID)
	if done.Status != "completed" || *done.Usage != (usage{5, 40, 45}) || openai.TokensOf(done.text()) != 40 {
		t.Errorf("after its end: status %s, usage %+v, %d tokens of text; want completed, 5+40 and 40", done.Status, done.Usage, openai.TokensOf(done.text()))
	}
	_, metrics := do(t, http.MethodGet, srv.URL+"/metrics", "", "")
	got := samples(t, metrics)
	for series, want := range map[string]float64{
		`lab_provider_responses_ended_total{mode="background",status="completed"}`: 1,
		`lab_provider_responses_tokens_total{kind="input",mode="background"}`:      5,
		`lab_provider_responses_tokens_total{kind="output",mode="background"}`:     40,
		`lab_provider_responses_spend_micro_dollars_total{mode="background"}`:      135,
		`lab_provider_requests_received_total{route="POST /v1/responses"}`:         1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v; want %v", series, got[series], want)
		}
	}
}

// event is a server-sent event of a Responses stream as the tests read it.
type event struct {
	name string // of the event line
	Type string `json:"type"`
	Seq  int64  `json:"sequence_number"`
	// Delta is the text an output_text.delta adds.
	Delta    string  `json:"delta"`
	Response *object `json:"response"`
}

// events reads a Responses stream from r, sending each event as it comes,
// and closes the channel at its end.
func events(t *testing.T, r io.Reader) <-chan event {
	ch := make(chan event, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				ev = event{name: name}
			} else if data, ok := strings.CutPrefix(line, "data: "); ok {
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Errorf("event %s: %v", data, err)
					return
				}
				ch <- ev
			}
		}
	}()
	return ch
}

// openStream sends a request whose answer is a stream, with ctx, and
// returns the answer; the caller closes its body.
func openStream(t *testing.T, ctx context.Context, method, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s %s: %d %s; want 200 and events", method, url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

// streamTypes are the events of a response of 40 tokens (three chunks).
var streamTypes = []string{
	"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
	"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
	"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed",
}

// checkEvents checks that evs are the events of a 40-token response from
// sequence number first on, and that the last carries the response
// completed with usage.
func checkEvents(t *testing.T, evs []event, first int, wantUsage usage) {
	t.Helper()
	var got, want []string
	for i, ev := range evs {
		got = append(got, fmt.Sprintf("%d %s %s", ev.Seq, ev.name, ev.Type))
		want = append(want, fmt.Sprintf("%d %s %s", first+i, streamTypes[first+i], streamTypes[first+i]))
	}
	if len(evs) != len(streamTypes)-first {
		want = nil
		for i := first; i < len(streamTypes); i++ {
			want = append(want, fmt.Sprintf("%d %s %s", i, streamTypes[i], streamTypes[i]))
		}
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Fatalf("events mismatch (-got +want):\n%s", diff)
	}
	last := evs[len(evs)-1].Response
	if last.Status != "completed" || last.Usage == nil || *last.Usage != wantUsage {
		t.Errorf("response.completed carries status %s, usage %+v; want completed, %+v", last.Status, last.Usage, wantUsage)
	}
}

func collect(ch <-chan event) []event {
	var evs []event
	for ev := range ch {
		evs = append(evs, ev)
	}
	return evs
}

func TestResponseStream(t *testing.T) {
	p, srv, _ := start(t, nil)
	resp := openStream(t, t.Context(), http.MethodPost, srv.URL+"/v1/responses", `{"model":"gpt-4o","input":`+page20+`,"max_output_tokens":40,"stream":true}`)
	defer resp.Body.Close()
	evs := collect(events(t, resp.Body))
	checkEvents(t, evs, 0, usage{5, 40, 45})
	var text strings.Builder
	for _, ev := range evs {
		text.WriteString(ev.Delta)
	}
	if n := openai.TokensOf(text.String()); n != 40 {
		t.Errorf("deltas are %d tokens; want 40", n)
	}
	if st := p.Stats(); st.Responses.Foreground != (Bill{InputTokens: 5, OutputTokens: 40, MicroDollars: 135}) || st.InFlight != 0 {
		t.Errorf("Stats() = %+v; want 5+40 tokens billed for $0.000135, nothing in flight", st)
	}
}

func TestForegroundClientThatLeavesIsNotBilled(t *testing.T) {
	pace := newPacer(0)
	p, srv, _ := start(t, func(o *Options) { o.Sleep = pace.sleep })
	ctx, cancel := context.WithCancel(t.Context())
	resp := openStream(t, ctx, http.MethodPost, srv.URL+"/v1/responses", `{"model":"gpt-4o","input":"hi","stream":true}`)
	defer resp.Body.Close()
	ch := events(t, resp.Body)
	created := receive(t, ch, "response.created")
	receive(t, pace.held, "first pause")
	cancel() // the client leaves
	for range ch {
	}
	if got := waitStats(t, p, func(st Stats) bool { return st.InFlight == 0 }); got.Canceled != 1 || got.MicroDollars != 0 || got.Responses.Stored != 0 {
		t.Errorf("Stats() = %+v; want one canceled call, nothing billed, nothing kept", got)
	}
	if status, _ := call(t, http.MethodGet, srv.URL+"/v1/responses/"+created.Response.ID, ""); status != http.StatusNotFound {
		t.Errorf("GET the response its client left: %d; want 404", status)
	}
}

// waitStats polls the provider's Stats, a bounded number of times, until
// done says yes, and returns them.
func waitStats(t *testing.T, p *Server, done func(Stats) bool) Stats {
	t.Helper()
	for range 1000 {
		if st := p.Stats(); done(st) {
			return st
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("Stats() = %+v, never as awaited", p.Stats())
	return Stats{}
}

func TestBackgroundStreamOutlivesItsClient(t *testing.T) {
	pace := newPacer(0)
	p, srv, _ := start(t, func(o *Options) { o.Sleep = pace.sleep })
	ctx, cancel := context.WithCancel(t.Context())
	resp := openStream(t, ctx, http.MethodPost, srv.URL+"/v1/responses", `{"model":"gpt-4o","input":`+page20+`,"max_output_tokens":40,"background":true,"stream":true}`)
	defer resp.Body.Close()
	ch := events(t, resp.Body)
	created := receive(t, ch, "response.created")
	if created.Response.Status != "queued" || !created.Response.Background {
		t.Errorf("response.created carries %+v; want it queued, in the background", created.Response)
	}
	receive(t, pace.held, "first pause")
	cancel() // the client leaves
	for range ch {
	}

	pace.release()
	ended(t, p, created.Response.ID)
	st := p.Stats()
	if st.Responses.BackgroundCompleted != 1 || st.Responses.Background != (Bill{InputTokens: 5, OutputTokens: 40, MicroDollars: 135}) || st.MicroDollars != 135 || st.Canceled != 0 || st.InFlight != 0 {
		t.Errorf("Stats() = %+v; want it completed and billed 5+40 tokens, $0.000135", st)
	}
	if got := get(t, srv.URL, created.Response.ID); got.Status != "completed" {
		t.Errorf("status %s; want completed", got.Status)
	}
}

func TestStreamResumes(t *testing.T) {
	pace := newPacer(1) // the first chunk comes at once, the others when released
	p, srv, _ := start(t, func(o *Options) { o.Sleep = pace.sleep })
	first := openStream(t, t.Context(), http.MethodPost, srv.URL+"/v1/responses", `{"model":"gpt-4o","input":`+page20+`,"max_output_tokens":40,"background":true,"stream":true}`)
	defer first.Body.Close()
	created := receive(t, events(t, first.Body), "response.created")
	receive(t, pace.held, "second pause")

	// Events 3 and 4 were sent before the resumption; the rest come live.
	resumed := openStream(t, t.Context(), http.MethodGet, srv.URL+"/v1/responses/"+created.Response.ID+"?stream=true&starting_after=2", "")
	defer resumed.Body.Close()
	ch := events(t, resumed.Body)
	evs := []event{receive(t, ch, "event 3"), receive(t, ch, "event 4")}
	pace.release()
	evs = append(evs, collect(ch)...)
	checkEvents(t, evs, 3, usage{5, 40, 45})

	// Once it has ended, the whole stream is replayed.
	ended(t, p, created.Response.ID)
	again := openStream(t, t.Context(), http.MethodGet, srv.URL+"/v1/responses/"+created.Response.ID+"?stream=true", "")
	defer again.Body.Close()
	checkEvents(t, collect(events(t, again.Body)), 0, usage{5, 40, 45})

	unstreamed := create(t, srv.URL, `{"model":"gpt-4o","input":"hi","background":true}`)
	if status, body := call(t, http.MethodGet, srv.URL+"/v1/responses/"+unstreamed.ID+"?stream=true", ""); status != http.StatusBadRequest {
		t.Errorf("streaming a response not created streamed: %d %s; want 400", status, body)
	}
}

func TestCancel(t *testing.T) {
	pace := newPacer(1) // the first chunk, 16 tokens, is made; the second is held
	p, srv, _ := start(t, func(o *Options) { o.Sleep = pace.sleep })
	r := create(t, srv.URL, `{"model":"gpt-4o","input":`+page20+`,"max_output_tokens":40,"background":true}`)
	receive(t, pace.held, "second pause")

	status, body := call(t, http.MethodPost, srv.URL+"/v1/responses/"+r.ID+"/cancel", "")
	got := decode[object](t, body)
	if status != 200 || got.Status != "cancelled" || *got.Usage != (usage{5, 16, 21}) || openai.TokensOf(got.text()) != 16 {
		t.Errorf("cancel: %d, status %s, usage %+v, %d tokens of text; want 200, cancelled, 5+16 and 16", status, got.Status, got.Usage, openai.TokensOf(got.text()))
	}
	st := p.Stats()
	if st.Responses.BackgroundCancelled != 1 || st.Responses.Background != (Bill{InputTokens: 5, OutputTokens: 16, MicroDollars: 63}) || st.MicroDollars != 63 || st.InFlight != 0 {
		t.Errorf("Stats() = %+v; want it cancelled and billed 5+16 tokens, $0.000063", st)
	}
	if _, again := call(t, http.MethodPost, srv.URL+"/v1/responses/"+r.ID+"/cancel", ""); decode[object](t, again).Status != "cancelled" {
		t.Errorf("cancelling again: %s; want the response as it is", again)
	}
	if after := p.Stats(); after.MicroDollars != 63 {
		t.Errorf("cancelling again billed %d micro-dollars more", after.MicroDollars-63)
	}

	pace.release()
	foreground := create(t, srv.URL, `{"model":"gpt-4o","input":"hi"}`)
	status, body = call(t, http.MethodPost, srv.URL+"/v1/responses/"+foreground.ID+"/cancel", "")
	want := `{"error":{"message":"Only background responses can be cancelled.","type":"invalid_request_error","param":null,"code":null}}`
	if got := strings.TrimSpace(string(body)); status != http.StatusBadRequest || got != want {
		t.Errorf("cancelling a foreground response: %d %s; want 400 %s", status, got, want)
	}
}

func TestInputItems(t *testing.T) {
	_, srv, _ := start(t, nil)
	r := create(t, srv.URL, `{"model":"gpt-4o","input":[{"role":"user","content":"What is the weather?"},`+
		`{"type":"function_call","id":"fc_1","call_id":"c1","name":"weather","arguments":"{}"},`+
		`{"type":"function_call_output","call_id":"c1","output":"sunny"}]}`)
	type list struct {
		Object string `json:"object"`
		Data   []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"data"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
		HasMore bool    `json:"has_more"`
	}
	items := func(query string) (types []string, first, last string, more bool) {
		status, body := call(t, http.MethodGet, srv.URL+"/v1/responses/"+r.ID+"/input_items"+query, "")
		l := decode[list](t, body)
		if status != 200 || l.Object != "list" {
			t.Fatalf("input_items%s: %d %s", query, status, body)
		}
		for _, it := range l.Data {
			types = append(types, it.Type)
			if it.ID == "" {
				t.Errorf("input_items%s: an item without an id", query)
			}
		}
		if len(l.Data) > 0 && (*l.FirstID != l.Data[0].ID || *l.LastID != l.Data[len(l.Data)-1].ID) {
			t.Errorf("input_items%s: first_id %s, last_id %s; want the page's first and last", query, *l.FirstID, *l.LastID)
		}
		return types, deref(l.FirstID), deref(l.LastID), l.HasMore
	}
	all, _, _, more := items("")
	if diff := cmp.Diff(all, []string{"function_call_output", "function_call", "message"}); diff != "" || more {
		t.Errorf("input_items: has_more %t, types mismatch (-got +want):\n%s", more, diff)
	}
	firstTwo, _, last, more := items("?order=asc&limit=2")
	if diff := cmp.Diff(firstTwo, []string{"message", "function_call"}); diff != "" || !more || last != "fc_1" {
		t.Errorf("input_items?order=asc&limit=2: has_more %t, last %s, types mismatch (-got +want):\n%s", more, last, diff)
	}
	rest, _, _, more := items("?order=asc&limit=2&after=fc_1")
	if diff := cmp.Diff(rest, []string{"function_call_output"}); diff != "" || more {
		t.Errorf("input_items after fc_1: has_more %t, types mismatch (-got +want):\n%s", more, diff)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestStoreForgetsTheOldest(t *testing.T) {
	p, srv, _ := start(t, func(o *Options) { o.MaxStored = 2 })
	var ids []string
	for range 3 {
		ids = append(ids, create(t, srv.URL, `{"model":"gpt-4o","input":"hi"}`).ID)
	}
	if status, _ := call(t, http.MethodGet, srv.URL+"/v1/responses/"+ids[0], ""); status != http.StatusNotFound {
		t.Errorf("the oldest response: %d; want 404", status)
	}
	get(t, srv.URL, ids[2])
	if got := p.Stats().Responses.Stored; got != 2 {
		t.Errorf("%d responses kept; want 2", got)
	}
}

func TestCloseStopsBackgroundResponses(t *testing.T) {
	pace := newPacer(0)
	p, srv, _ := start(t, func(o *Options) { o.Sleep = pace.sleep })
	r := create(t, srv.URL, `{"model":"gpt-4o","input":"hi","background":true}`)
	receive(t, pace.held, "first pause")
	p.Close()
	got := get(t, srv.URL, r.ID)
	if st := p.Stats(); got.Status != "failed" || st.InFlight != 0 || st.MicroDollars != 0 {
		t.Errorf("after Close: status %s, Stats() %+v; want failed, nothing in flight or billed", got.Status, st)
	}
	late := create(t, srv.URL, `{"model":"gpt-4o","input":"hi","background":true}`)
	if got := get(t, srv.URL, late.ID); got.Status != "failed" {
		t.Errorf("a response created after Close: status %s; want failed", got.Status)
	}
}
