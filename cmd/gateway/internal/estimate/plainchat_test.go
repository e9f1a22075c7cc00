package estimate

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeChat is the reading plainChat stands in for: encoding/json, then checkKeys.
func decodeChat(body []byte) (chatBodyMessages, int64, error) {
	var b chatBodyMessages
	if err := json.Unmarshal(body, &b); err != nil {
		return chatBodyMessages{}, 0, err
	}
	unread, err := checkKeys(body, &b)
	return b, unread, err
}

// checkPlainChat fails when plainChat reads body otherwise than decodeChat does, and reports
// whether it read it.
func checkPlainChat(t *testing.T, body []byte) bool {
	t.Helper()
	got, gotUnread, ok := plainChat(body)
	if !ok {
		return false
	}
	want, wantUnread, err := decodeChat(body)
	if err != nil {
		t.Fatalf("plainChat(%q) reads it, but decoding refuses it: %v", body, err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(chatBodyMessages{})); diff != "" {
		t.Errorf("plainChat(%q) (-decoded +plain):\n%s", body, diff)
	}
	if gotUnread != wantUnread {
		t.Errorf("plainChat(%q) counts %d unread tokens; checkKeys counts %d", body, gotUnread, wantUnread)
	}
	return true
}

// pythonChat is a chat request as Python's json.dumps writes it by default: a space after each
// colon and comma, and every character past ASCII escaped.
const pythonChat = `{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Caf\u00e9 au lait, s'il vous pla\u00eet \ud83d\ude00"}], "model": "gpt-4o-mini", "temperature": 0.2, "max_tokens": 64, "stream": false}`

// nodeChat is a chat request with tools and a tool call's round trip, as JSON.stringify writes it.
const nodeChat = `{"model":"gpt-4o","messages":[{"role":"user","content":"Weather in Paris?"},` +
	`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_1","content":"{\"c\":21}"}],` +
	`"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],` +
	`"tool_choice":"auto","parallel_tool_calls":true,"response_format":{"type":"json_object"},"max_completion_tokens":256,"n":1,"user":"u-42"}`

// TestPlainChat checks that plainChat reads the bodies clients send, as decoding reads them, and
// leaves to decoding every body it is not sure of.
func TestPlainChat(t *testing.T) {
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, typicalChat(t), "", "  "); err != nil {
		t.Fatal(err)
	}
	plain := []struct {
		name string
		body string
	}{
		{"short", shortChat},
		{"typical, as encoding/json writes it", string(typicalChat(t))},
		{"typical, indented", pretty.String()},
		{"a message a line", cookbookChat},
		{"as Python's json.dumps writes it", pythonChat},
		{"tools and a tool call, as JSON.stringify writes it", nodeChat},
		{"spaces everywhere", " \r\n{ \"model\" :\t\"m\" , \"messages\" : [ { \"role\" : \"user\" , \"content\" : \"hi\" } , { } ] }\n "},
		{"content with escapes and UTF-8", `{"model":"m","messages":[{"role":"user","content":"«\"quoted\"»\n\u2028\\ お誕生日"}]}`},
		{"content parts", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What?"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}]}`},
		{"nulls", `{"model":"m","max_tokens":null,"n":null,"max_completion_tokens":null,"tools":null,"functions":null,"response_format":null,"messages":[{"role":"assistant","content":null,"tool_calls":null,"function_call":null}]}`},
		{"function call and functions", `{"model":"m","functions":[{"name":"g","parameters":{}}],"messages":[{"role":"assistant","function_call":{"name":"g","arguments":"{}"}},{"role":"function","name":"g","content":"1"}]}`},
		{"unread keys, free and counted", `{"model":"m","temperature":0.7,"metadata":{"k":"v"},"seed":1e3,"logit_bias":{"50256":-100},"prediction":{"type":"content","content":"x"},"messages":[{"role":"assistant","refusal":"no","audio":{"id":"a"}}]}`},
		{"non-ASCII unread value", `{"model":"m","user":"Zoë","messages":[{"role":"user","content":"x"}]}`},
		{"caps at their bounds", `{"model":"m","max_tokens":-0,"n":999999999999999999,"messages":[{}]}`},
		{"no messages", `{"model":"m","messages":[]}`},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`},
		{"empty object", `{}`},
		{"both caps", `{"model":"m","max_tokens":1,"max_completion_tokens":2,"messages":[{}]}`},
	}
	for _, tc := range plain {
		if !checkPlainChat(t, []byte(tc.body)) {
			t.Errorf("%s: plainChat leaves %s to decoding; want it read", tc.name, tc.body)
		}
	}
	doubtful := []struct {
		name string
		body string
	}{
		{"not JSON", `{"model":"m","messages":[}`},
		{"cut off", `{"model":"m","messages":[{"role":"user"`},
		{"trailing text", `{"model":"m","messages":[]} x`},
		{"null", `null`},
		{"an array", `[{"model":"m"}]`},
		{"a string", `"model"`},
		{"a repeated key", `{"model":"m","model":"n","messages":[]}`},
		{"a key in other cases", `{"Model":"m","messages":[]}`},
		{"an escaped key", `{"mod\u0065l":"m","messages":[]}`},
		{"an escaped unread key", `{"model":"m","temp\u0065rature":1,"messages":[]}`},
		{"a key that folds to a field", `{"model":"m","max_to` + "\u212a" + `ens":1,"messages":[]}`},
		{"a non-ASCII unread key", `{"model":"m","Zoë":1,"messages":[]}`},
		{"another endpoint's cap", `{"model":"m","max_output_tokens":16,"messages":[]}`},
		{"stream_options", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`},
		{"a null model", `{"model":null,"messages":[]}`},
		{"a number for model", `{"model":4,"messages":[]}`},
		{"an escaped model", `{"model":"gpt\u002d4o","messages":[]}`},
		{"a non-ASCII model", `{"model":"modèle","messages":[]}`},
		{"a null stream", `{"model":"m","stream":null,"messages":[]}`},
		{"a string for stream", `{"model":"m","stream":"true","messages":[]}`},
		{"an exponent", `{"model":"m","max_tokens":1e2,"messages":[]}`},
		{"a fraction", `{"model":"m","max_tokens":1.0,"messages":[]}`},
		{"19 digits", `{"model":"m","n":1234567890123456789,"messages":[]}`},
		{"past int64", `{"model":"m","max_completion_tokens":99999999999999999999,"messages":[]}`},
		{"a string for a cap", `{"model":"m","max_tokens":"16","messages":[]}`},
		{"null messages", `{"model":"m","messages":null}`},
		{"an object for messages", `{"model":"m","messages":{"role":"user"}}`},
		{"a null message", `{"model":"m","messages":[null,{"role":"user"}]}`},
		{"a string message", `{"model":"m","messages":["hi"]}`},
		{"a repeated role", `{"model":"m","messages":[{"role":"user","role":"system"}]}`},
		{"a role in other cases", `{"model":"m","messages":[{"Role":"user"}]}`},
		{"a null role", `{"model":"m","messages":[{"role":null}]}`},
		{"an escaped role", `{"model":"m","messages":[{"role":"us\u0065r"}]}`},
		{"a non-ASCII name", `{"model":"m","messages":[{"role":"user","name":"Zoë"}]}`},
		{"a number for tool_call_id", `{"model":"m","messages":[{"role":"tool","tool_call_id":1}]}`},
		{"an escaped message key", `{"model":"m","messages":[{"cont\u0065nt":"x"}]}`},
	}
	for _, tc := range doubtful {
		if checkPlainChat(t, []byte(tc.body)) {
			t.Errorf("%s: plainChat reads %s; want it left to decoding", tc.name, tc.body)
		}
	}
}

// TestPlainChatMatchesJSON checks plainChat against decoding on chat requests made of the keys
// and values that could tell them apart.
func TestPlainChatMatchesJSON(t *testing.T) {
	counts := []string{`16`, `-1`, `-0`, `null`, `123456789012345678`, `1234567890123456789`, `1e2`, `1.0`, `"16"`}
	raws := []string{`null`, `[]`, `{}`, `[{"type":"function","function":{"name":"f"}}]`, `{ "a" : [1, "]}"] }`, `"x"`, `0`}
	top := members{
		`"model"`:                 {`"gpt-4o"`, `"m"`, `""`, `null`, `"gpt\u002d4o"`, `"modèle"`, `4`},
		`"stream"`:                {`true`, `false`, `null`, `"true"`},
		`"max_tokens"`:            counts,
		`"max_completion_tokens"`: counts,
		`"n"`:                     counts,
		`"tools"`:                 raws,
		`"functions"`:             raws,
		`"response_format"`:       raws,
		`"temperature"`:           {`0.7`, `null`, `{"x":"}"}`},
		`"prediction"`:            raws,
		`"messages"`:              {`null`, `{}`, `[null]`, `["hi"]`, `[]`},
		`"Model"`:                 {`"m"`},
		`"mod\u0065l"`:            {`"m"`},
		`"max_output_tokens"`:     {`16`},
		`"stream_options"`:        {`{"include_usage":true}`, `null`},
		`"service_tier"`:          {`"flex"`, `"priority"`, `null`, `"fl\u0065x"`, `3`},
		`"Service_Tier"`:          {`"flex"`},
	}
	contents := []string{`"hi"`, `"a\"b\\c\u00e9"`, `null`, `[{"type":"text","text":"x"}]`, `{"k":[]}`, `7`}
	texts := []string{`"user"`, `"assistant"`, `""`, `"a b"`, `null`, `"us\u0065r"`, `"Zoë"`, `1`}
	message := members{
		`"role"`:          texts,
		`"name"`:          texts,
		`"tool_call_id"`:  texts,
		`"content"`:       contents,
		`"tool_calls"`:    raws,
		`"function_call"`: raws,
		`"refusal"`:       contents,
		`"Content"`:       contents,
	}
	m := bodyMaker{rand.New(rand.NewPCG(5, 6))}
	read, readWithMessages := 0, 0
	for range 5000 {
		var b strings.Builder
		b.WriteString(m.space() + "{")
		n, withMessages := m.rng.IntN(3), m.rng.IntN(5) > 0
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(m.member(top))
		}
		if withMessages {
			if n > 0 {
				b.WriteString(",")
			}
			b.WriteString(m.space() + `"messages":` + m.space() + "[")
			for j := range 1 + m.rng.IntN(3) {
				if j > 0 {
					b.WriteString(",")
				}
				b.WriteString(m.space() + m.object(message, m.rng.IntN(4)) + m.space())
			}
			b.WriteString("]")
		}
		b.WriteString("}" + m.space())
		if checkPlainChat(t, []byte(b.String())) {
			read++
			if withMessages {
				readWithMessages++
			}
		}
	}
	if read < 1000 || readWithMessages < 500 {
		t.Errorf("plainChat read %d of 5000 bodies, %d with messages; want the table to reach it more often", read, readWithMessages)
	}
}

// members are the keys of an object, quoted, each with the values to give it.
type members map[string][]string

// bodyMaker makes JSON bodies at random.
type bodyMaker struct {
	rng *rand.Rand
}

// space returns JSON whitespace, often none.
func (m bodyMaker) space() string {
	return []string{"", "", " ", "\n\t"}[m.rng.IntN(4)]
}

// member returns a member of ms, its key and value picked at random, with whitespace around.
func (m bodyMaker) member(ms members) string {
	keys := slices.Sorted(maps.Keys(ms))
	key := keys[m.rng.IntN(len(keys))]
	values := ms[key]
	return m.space() + key + m.space() + ":" + m.space() + values[m.rng.IntN(len(values))] + m.space()
}

// object returns an object of n members of ms picked at random.
func (m bodyMaker) object(ms members, n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(m.member(ms))
	}
	b.WriteString(m.space() + "}")
	return b.String()
}

func FuzzPlainChat(f *testing.F) {
	seeds := []string{
		shortChat,
		cookbookChat,
		pythonChat,
		nodeChat,
		string(typicalChat(f)),
		`{"model":"m","stream":true,"max_tokens":10,"n":2,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"detail":"low"}}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"arguments":"{}"}}]}],"tools":[{"type":"function"}]}`,
		`{ "model" : "m" ,` + "\n\t" + `"messages" : [ { "role" : "user" , "content" : "caf\u00e9 \"x\" お" } ] }`,
		`{"model":"m","max_tokens":null,"tools":null,"messages":[{"role":"user","content":null,"name":"n","tool_call_id":"c"}]}`,
		`{"model":"m","model":"m","messages":[]}`,
		`{"Model":"m","messages":[]}`,
		`{"model":"m","max_output_tokens":1,"messages":[]}`,
		`{"model":"m","temperature":0.2,"metadata":{"a":{"b":[1,2]}},"messages":[{"role":"user","audio":{"id":"x"}}]}`,
		`{"model":"m","messages":[]}`,
		`{"model":"m","max_tokens":1e2,"n":1.0,"max_completion_tokens":-0,"messages":[]}`,
		`{"model":"m","max_tokens":99999999999999999999,"messages":[]}`,
		`{"model":"m","stream_options":{"include_usage":true},"messages":[]}`,
		`{"model":"m","messages":[null]}`,
		`{"model":null,"stream":null,"messages":null}`,
		`{"model":"m"`,
		`null`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkPlainChat(t, body)
	})
}

// checkPlainEmbeddings fails when plainEmbeddings reads body otherwise than read does, and
// reports whether it read it.
func checkPlainEmbeddings(t *testing.T, body []byte) bool {
	t.Helper()
	got, gotUnread, ok := plainEmbeddings(body)
	if !ok {
		return false
	}
	var want embeddingsBody
	wantUnread, err := read(body, &want)
	if err != nil {
		t.Fatalf("plainEmbeddings(%q) reads it, but read refuses it: %v", body, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plainEmbeddings(%q) (-read +plain):\n%s", body, diff)
	}
	if gotUnread != wantUnread {
		t.Errorf("plainEmbeddings(%q) counts %d unread tokens; read counts %d", body, gotUnread, wantUnread)
	}
	return true
}

// TestPlainEmbeddings checks that plainEmbeddings reads the bodies clients send as read reads
// them, and leaves to read every body it is not sure of.
func TestPlainEmbeddings(t *testing.T) {
	for _, body := range []string{
		`{"model":"text-embedding-3-small","input":"hello"}`,
		`{"input": ["a", "b\"c", "caf\u00e9"], "model": "text-embedding-3-small", "encoding_format": "base64"}`,
		` { "model" : "m" , "input" : [[1,2],[3]] , "dimensions" : 256 , "user" : "u" } `,
		`{"model":"m","input":[1,2,3],"extra":{"a":[1,"two"]}}`,
		`{"model":"m","input":null}`,
		`{"model":"m"}`,
		`{}`,
	} {
		if !checkPlainEmbeddings(t, []byte(body)) {
			t.Errorf("plainEmbeddings(%s) left it to read; want it read", body)
		}
	}
	for _, body := range []string{
		`{"model":"m","input":"a","model":"n"}`,    // repeated
		`{"Model":"m","input":"a"}`,                // another case
		`{"model":"m","inp\u0075t":"a"}`,           // escaped
		`{"model":"m","input":"a","max_tokens":5}`, // another endpoint's cap
		`{"model":"caf\u00e9","input":"a"}`,        // a model that is not plain ASCII
		`{"model":null,"input":"a"}`,
		`{"model":"m","input":"a"`,
		`["model"]`,
	} {
		if checkPlainEmbeddings(t, []byte(body)) {
			t.Errorf("plainEmbeddings(%s) read it; want it left to read", body)
		}
	}
}

func FuzzPlainEmbeddings(f *testing.F) {
	f.Add([]byte(`{"model":"text-embedding-3-small","input":["a","b"],"encoding_format":"float"}`))
	f.Add([]byte(`{"input":"x","model":"m","dimensions":8,"other":[{"k":null}]}`))
	f.Fuzz(func(t *testing.T, body []byte) { checkPlainEmbeddings(t, body) })
}
