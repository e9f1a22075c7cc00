package estimate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEachTopFieldReadsNamesAndValuesInOnePass(t *testing.T) {
	body := []byte(`{ "model" : "m", "messages":[{"role":"user","content":"a, \"b\": {c}"}],
		"prediction": {"type": "content", "content": "}]"} ,"n":2,"stop":null}`)
	var got [][2]string
	eachTopField(body, func(name, value []byte) { got = append(got, [2]string{string(name), string(value)}) })
	want := [][2]string{
		{"model", `"m"`},
		{"messages", `[{"role":"user","content":"a, \"b\": {c}"}]`},
		{"prediction", `{"type": "content", "content": "}]"}`},
		{"n", "2"},
		{"stop", "null"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}
