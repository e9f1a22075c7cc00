package provider

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// TestOpenAISDK drives the Responses API with OpenAI's Go SDK, which must
// read every answer.
func TestOpenAISDK(t *testing.T) {
	pace := newPacer(0)
	p, srv, _ := start(t, func(o *Options) { o.Sleep = pace.sleep })
	c := sdk.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	ctx := t.Context()
	params := func(background bool) responses.ResponseNewParams {
		return responses.ResponseNewParams{
			Model:           "gpt-4o",
			Input:           responses.ResponseNewParamsInputUnion{OfString: sdk.String("Summarise this page.")}, // 5 tokens
			MaxOutputTokens: sdk.Int(40),
			Background:      sdk.Bool(background),
		}
	}

	held, err := c.Responses.New(ctx, params(true))
	if err != nil || held.Status != responses.ResponseStatusQueued || !held.Background {
		t.Fatalf("New(background) = %+v, %v; want it queued in the background", held, err)
	}
	receive(t, pace.held, "first pause")
	cancelled, err := c.Responses.Cancel(ctx, held.ID)
	if err != nil || cancelled.Status != responses.ResponseStatusCancelled || cancelled.Usage.InputTokens != 5 || cancelled.Usage.OutputTokens != 0 {
		t.Errorf("Cancel() = %+v, %v; want it cancelled, billed 5 input tokens", cancelled, err)
	}
	pace.release()

	bg, err := c.Responses.New(ctx, params(true))
	if err != nil {
		t.Fatalf("New(background): %v", err)
	}
	done := poll(t, c, bg.ID)
	for what, v := range map[string]any{
		"queued": *held, "cancelled": *cancelled, "completed": *done, "usage": done.Usage,
		"input details": done.Usage.InputTokensDetails, "output details": done.Usage.OutputTokensDetails,
		"message": done.Output[0].AsMessage(), "text": done.Output[0].AsMessage().Content[0].AsOutputText(),
	} {
		checkParsed(t, what, v)
	}
	if done.Usage.InputTokens != 5 || done.Usage.OutputTokens != 40 || done.Usage.TotalTokens != 45 ||
		openai.TokensOf(done.OutputText()) != 40 || done.Output[0].Type != "message" || !strings.HasPrefix(done.Output[0].ID, "msg_") {
		t.Errorf("Get() = %+v; want 5+40 tokens and a message of 40", done)
	}

	items, err := c.Responses.InputItems.List(ctx, bg.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Type != "message" || !strings.HasPrefix(items.Data[0].ID, "msg_") || items.HasMore {
		t.Errorf("InputItems.List() = %+v, %v; want the one message", items, err)
	}

	types, last := readSDKStream(t, c.Responses.NewStreaming(ctx, params(false)))
	if diff := cmp.Diff(types, streamTypes); diff != "" {
		t.Errorf("NewStreaming() events mismatch (-got +want):\n%s", diff)
	}
	if last.Response.Usage.OutputTokens != 40 || last.Response.Status != responses.ResponseStatusCompleted {
		t.Errorf("response.completed carries %+v; want it completed with 40 output tokens", last.Response)
	}

	_, last = readSDKStream(t, c.Responses.NewStreaming(ctx, params(true)))
	types, _ = readSDKStream(t, c.Responses.GetStreaming(ctx, last.Response.ID, responses.ResponseGetParams{StartingAfter: sdk.Int(2)}))
	if diff := cmp.Diff(types, streamTypes[3:]); diff != "" {
		t.Errorf("GetStreaming(starting after 2) events mismatch (-got +want):\n%s", diff)
	}

	if err := c.Responses.Delete(ctx, bg.ID); err != nil {
		t.Errorf("Delete(): %v", err)
	}
	var apiErr *sdk.Error
	if _, err := c.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound ||
		apiErr.Message != "Response with id '"+bg.ID+"' not found." {
		t.Errorf("Get() after Delete() error = %v; want 404, not found", err)
	}

	st := p.Stats()
	want := ResponsesStats{Stored: 3, Completed: 1, BackgroundCompleted: 2, BackgroundCancelled: 1,
		Foreground: Bill{InputTokens: 5, OutputTokens: 40, MicroDollars: 135}, Background: Bill{InputTokens: 3 * 5, OutputTokens: 2 * 40, MicroDollars: 3*5*3 + 2*40*3}}
	if diff := cmp.Diff(st.Responses, want); diff != "" {
		t.Errorf("Stats().Responses mismatch (-got +want):\n%s", diff)
	}
}

// poll reads the response id until it completes, a bounded number of times.
func poll(t *testing.T, c sdk.Client, id string) *responses.Response {
	t.Helper()
	for range 1000 {
		r, err := c.Responses.Get(t.Context(), id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatalf("Get(): %v", err)
		}
		if r.Status == responses.ResponseStatusCompleted {
			return r
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("response %s never completed", id)
	return nil
}

// readSDKStream reads a stream of events to its end and returns their types and
// the last one.
func readSDKStream(t *testing.T, s *ssestream.Stream[responses.ResponseStreamEventUnion]) ([]string, responses.ResponseStreamEventUnion) {
	t.Helper()
	defer s.Close()
	var types []string
	var last responses.ResponseStreamEventUnion
	for s.Next() {
		ev := s.Current()
		if len(types) > 0 && ev.SequenceNumber != last.SequenceNumber+1 {
			t.Errorf("event %s numbered %d after %d", ev.Type, ev.SequenceNumber, last.SequenceNumber)
		}
		last = ev
		types = append(types, ev.Type)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return types, last
}

// parsedField is what an SDK's respjson.Field says of one field it
// decoded; OpenAI's SDK and Anthropic's have one each.
type parsedField interface {
	Raw() string
	Valid() bool
}

var _ parsedField = respjson.Field{}

// checkParsed checks that the SDK read every field of v, a struct it
// decoded: each field it requires is there, and none is of the wrong type.
// Fields it does not know are allowed: OpenAI's objects carry store, which
// the SDK leaves out.
func checkParsed(t *testing.T, what string, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	meta := rv.FieldByName("JSON")
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		mv := meta.FieldByName(f.Name)
		if f.Name == "JSON" || !mv.IsValid() {
			continue
		}
		m := mv.Interface().(parsedField)
		switch {
		case m.Raw() == "" && strings.Contains(f.Tag.Get("api"), "required"):
			t.Errorf("%s: %s is missing", what, f.Tag.Get("json"))
		case m.Raw() != "" && m.Raw() != respjson.Null && !m.Valid():
			t.Errorf("%s: %s is of the wrong type: %s", what, f.Tag.Get("json"), m.Raw())
		}
	}
}
